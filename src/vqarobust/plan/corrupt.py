"""The corrupt stage (rules/corrupt.smk): the inputs and params of the jobs that make the
corrupted image folders, score their LPIPS and find the object boxes that the box-aware
corruptions need.

Every param here is part of a job's identity: Snakemake reruns a job whose param value
changes, so each method returns exactly what the rule files passed before (the same
values, the same key order, the same canonical() wrapping).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vqarobust import corruptions
from vqarobust.config_keys import STYLIZE
from vqarobust.corruptions.boxes import NEEDS as BOXES
from vqarobust.params import canonical

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan


class CorruptStage:
    """The corrupt stage of one study plan (``plan.corrupt``)."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    @property
    def lpips(self) -> bool:
        """Whether LPIPS is scored: its weights are configured and, with
        ``missing_weights: skip``, here (``plan.skipped_lpips`` says why not)."""
        return bool(self.config["lpips"].get("backbone")) and self.plan.skipped_lpips is None

    def corrupt_input(self, wildcards: Any) -> dict[str, Any]:
        """The clean images, plus what a corruption needs beyond them: the ``stylize``
        block's weights and styles, the object boxes of a box-aware corruption."""
        inputs: dict[str, Any] = {"images": self.plan.image_folder("clean", 0)}
        if corruptions.needs_style_weights(wildcards.corruption):
            stylize = self.config[STYLIZE]
            inputs.update(
                weights=self.plan.user_path(stylize["weights"]),
                styles=self.plan.user_path(stylize["styles"]),
            )
        if corruptions.needs(wildcards.corruption) == BOXES:
            inputs["boxes"] = f"results/{self.plan.dataset}/boxes.parquet"
        return inputs

    def box_sources(self, wildcards: Any) -> dict[str, Any]:
        """The annotations that say where objects are: COCO's instances (vqav2), GQA's
        questions and scene graphs; none for scenes (its graphs are generated)."""
        dataset = self.config["dataset"]
        if dataset["adapter"] == "vqav2":
            return {"instances": self.plan.user_path(self.config["context"]["instances"])}
        if dataset["adapter"] == "gqa":
            return {key: self.plan.user_path(dataset[key]) for key in ("questions", "scene_graphs")}
        return {}

    def box_params(self, wildcards: Any) -> dict[str, Any]:
        """The dataset adapter, and the scenes' seed and split (what generates their graphs)."""
        dataset = self.config["dataset"]
        settings: dict[str, Any] = {"adapter": dataset["adapter"]}
        if dataset["adapter"] == "scenes":
            settings.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["split"])
        return settings

    def lpips_input(self, wildcards: Any) -> dict[str, Any]:
        """One corrupted subset's images, the clean ones they are scored against, and the
        LPIPS weights."""
        lpips = self.config["lpips"]
        return {
            "clean": self.plan.image_folder("clean", 0),
            "images": self.plan.image_folder(wildcards.corruption, wildcards.severity),
            "backbone": self.plan.user_path(lpips["backbone"]),
            "linear": self.plan.user_path(lpips["linear"]),
        }

    def lpips_files(self, wildcards: Any) -> list[str]:
        """Every corrupted subset's LPIPS table (the image_quality analysis), none when off."""
        if not self.lpips:
            return []
        return [
            f"results/{self.plan.dataset}/quality/lpips/{p}/{s}.parquet"
            for p, s in self.plan.image_subsets()
            if p != "clean"
        ]

    def stylize_params(self, wildcards: Any) -> Any:
        """The ``stylize`` block's settings for the jobs of a corruption built from it
        (none for the others)."""
        if not corruptions.needs_style_weights(wildcards.corruption):
            return {}
        return canonical({"style_size": self.config[STYLIZE]["style_size"]})

    def corruption_options(self, wildcards: Any) -> Any:
        """The config settings a corruption takes (``geometric.border`` for the geometric
        ones that uncover a border; none for the others)."""
        taken = corruptions.options(wildcards.corruption)
        return canonical({key: self.config["geometric"][key] for key in taken})

    def ssim_params(self, wildcards: Any) -> Any:
        """SSIM's window (``ssim.window``): the scores stored beside each image."""
        return canonical({"window": self.config["ssim"]["window"]})

    def image_encoding(self, wildcards: Any) -> Any:
        """How the corrupted images are stored: a change re-encodes every folder."""
        encoding = {k: self.config["storage"][k] for k in ("image_format", "jpeg_quality")}
        return canonical(encoding)

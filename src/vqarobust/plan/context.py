"""The context stage of the study plan: the params and sources of rules/context.smk
(``swap_context``, SwapMix on pixels)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan


class ContextStage:
    """What the one ``swap_context`` job reads and what changes its swaps."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    def context_params(self, wildcards: Any) -> dict[str, Any]:
        """What changes the swaps: seeds, k, the objects per question, the perturbations
        (ordered as the rule's outputs), the scenes split or, on VQAv2, the smallest
        instance and the storage encoding."""
        dataset, context = self.config["dataset"], self.config["context"]
        settings = {
            "perturbations": self.plan.context_perturbations,
            "seed": self.config["seed"],
            "k": context["k"],
            "max_objects": context["max_objects"],
        }
        if dataset["adapter"] == "scenes":
            settings.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["split"])
        else:
            encoding = self.config["storage"]
            settings.update(
                min_area=context["min_area"],
                image_format=encoding["image_format"],
                jpeg_quality=encoding["jpeg_quality"],
            )
        return settings

    def context_sources(self, wildcards: Any) -> dict[str, Any]:
        """VQAv2: the clean images, the COCO images (donors) and the instance annotations."""
        if self.config["dataset"]["adapter"] != "vqav2":
            return {}
        return {
            "clean": self.plan.image_folder("clean", 0),
            "source": self.plan.user_path(self.config["dataset"]["images"]),
            "instances": self.plan.user_path(self.config["context"]["instances"]),
        }

"""The features stage: input functions and params of rules/features.smk (region features,
feature swaps) and the feature paths that training and inference read.

Region-feature models (LXMERT) read a feature table instead of pixels: a detector-like
CNN's, or perfect sight's (the scene graph itself). The rules here make those tables and
their SwapMix swaps; plan.models and plan.infer ask this stage where the tables are.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from vqarobust.features import word_vectors
from vqarobust.params import canonical

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan


class FeaturesStage:
    """Where the feature tables are and what each feature job is made from."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    # Paths other stages read --------------------------------------------------------

    def feature_path(self, source: str, split: str) -> str:
        """The feature table of a clean split (train or eval)."""
        return f"resources/features/{self.plan.dataset}/{source}/{split}.parquet"

    def image_feature_path(self, source: str, corruption: str, severity: Any) -> str:
        """The features of a corrupted (or control) image folder. Perfect sight reads the
        scene graph, not the pixels: its features of a corrupted image are the clean ones."""
        if self.config["features"][source]["kind"] == "perfect_sight":
            return self.feature_path(source, "eval")
        return f"results/{self.plan.dataset}/features/{source}/{corruption}/{severity}.parquet"

    def swap_mode(self, source: str) -> str:
        """How a feature swap replaces a row: a donor's row, or perfect sight's new labels."""
        return "labels" if self.config["features"][source]["kind"] == "perfect_sight" else "donor"

    def word_vectors_identity(self) -> dict[str, str]:
        """What names the word vectors (the file itself is an input where it is read)."""
        return dict(self._word_vectors_identity)

    @functools.cached_property
    def _word_vectors_identity(self) -> dict[str, str]:
        # A configured file is named by its SHA-256: hashed once, not once per job.
        path = self.config["context"].get("word_vectors")
        return {"file": path} if path else word_vectors.identity(None)

    def word_vectors_input(self, wildcards: Any) -> dict[str, Any]:
        """The configured word vectors file, as an input of the jobs that read it."""
        path = self.config["context"].get("word_vectors")
        return {"word_vectors": self.plan.user_path(path)} if path else {}

    def detector_dir(self, source: str) -> str:
        """The trained detector of one feature source."""
        return f"resources/detectors/{self.plan.dataset}/{source}"

    # train_detector -------------------------------------------------------------------

    def detector_params(self, wildcards: Any) -> Any:
        """The detector's training settings (any change retrains it)."""
        source = self.config["features"][wildcards.feature]
        settings = {k: source[k] for k in ("dim", "epochs", "batch_size", "learning_rate")}
        dataset = self.config["dataset"]
        settings.update(
            seed=self.config["seed"],
            scene_seed=dataset.get("scene_seed", 0),
            split=dataset["train_split"],
            threads=self.config["threads"]["train"],
        )
        return canonical(settings)

    # extract_features, extract_image_features -------------------------------------------

    def _scene_split(self, split: str) -> str:
        dataset = self.config["dataset"]
        return dataset["train_split"] if split == "train" else dataset["split"]

    def feature_input(self, wildcards: Any) -> dict[str, Any]:
        """What a feature table is made from: the split's images and the trained detector,
        or (perfect sight) the split's questions, whose images' scene graphs are read; on
        GQA also the scene graphs file and a released source's files."""
        source = self.config["features"][wildcards.feature]
        kind = source["kind"]
        dataset = self.config["dataset"]
        user_path = self.plan.user_path
        questions = f"resources/datasets/{self.plan.dataset}/{wildcards.split}/questions.parquet"
        if dataset["adapter"] == "gqa":
            inputs = {
                "questions": questions,
                "scene_graphs": user_path(dataset["scene_graphs"]),
                **{k: user_path(source[k]) for k in ("info", "folder") if k in source},
            }
            if "path" in source:
                inputs["tsv"] = user_path(source["path"])
            if kind == "perfect_sight":
                return {**inputs, **self.word_vectors_input(wildcards)}
            return inputs
        if kind == "detector":
            return {
                "images": f"resources/datasets/{self.plan.dataset}/{wildcards.split}/images",
                "detector": self.detector_dir(wildcards.feature),
            }
        return {"questions": questions, **self.word_vectors_input(wildcards)}

    def feature_params(self, wildcards: Any) -> Any:
        """How a feature table is made (extract_image_features has no split: eval's)."""
        kind = self.config["features"][wildcards.feature]["kind"]
        dataset = self.config["dataset"]
        if dataset["adapter"] == "gqa":
            settings: dict[str, Any] = {"kind": kind, "adapter": "gqa"}
        else:
            settings = {
                "kind": kind,
                "scene_seed": dataset.get("scene_seed", 0),
                "split": self._scene_split(getattr(wildcards, "split", "eval")),
            }
        if kind == "perfect_sight":
            settings["word_vectors"] = self.word_vectors_identity()
        if hasattr(wildcards, "split"):
            # A clean split's table is also the donor bank of its feature swaps.
            settings["donors"] = self.config["context"]["donors"]
        return canonical(settings)

    # swap_features ----------------------------------------------------------------------

    def swap_features_input(self, wildcards: Any) -> dict[str, Any]:
        """The eval split's questions and features (and, on GQA, the questions and scene
        graphs files: the reasoning steps select each question's relevant objects)."""
        inputs = {
            "questions": self.plan.questions,
            "features": self.feature_path(wildcards.feature, "eval"),
            **self.word_vectors_input(wildcards),
        }
        dataset = self.config["dataset"]
        if dataset["adapter"] == "gqa":
            inputs["gqa_questions"] = self.plan.user_path(dataset["questions"])
            inputs["scene_graphs"] = self.plan.user_path(dataset["scene_graphs"])
        return inputs

    def swap_features_params(self, wildcards: Any) -> Any:
        """The swaps' settings: every context perturbation is made by the one job."""
        context = self.config["context"]
        dataset = self.config["dataset"]
        settings = {
            "perturbations": self.plan.context_perturbations,
            "seed": self.config["seed"],
            "k": context["k"],
            "threshold": context["threshold"],
            "mode": self.swap_mode(wildcards.feature),
            "class_attributes": context["class_attributes"],
            "attribute_swaps": context["attribute_swaps"],
            "max_objects": context["max_objects"],
            "word_vectors": self.word_vectors_identity(),
        }
        if dataset["adapter"] == "gqa":
            settings["adapter"] = "gqa"
        else:
            settings.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["split"])
        return canonical(settings)

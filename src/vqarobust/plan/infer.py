"""The infer stage: input functions and params of rules/infer.smk (run_model,
image_attention), and the prediction and attention tables the analysis reads.

A per-model run_model job also draws its model's attention maps after its answers, with
the same weights (:meth:`InferStage.attention_params`); image_attention is the rule of
per-subset inference, where no one job holds a model's weights for all of its subsets.

Where a subset's inputs come from is decided by its kind in the plan's catalogue
(:meth:`StudyPlan.subset`), once for pixel models and once for feature models. A run_model
job answers every subset of its model (``inference_jobs: model``, one weight load) or one
(``subset``, for clusters): :meth:`InferStage.job_subsets`.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from vqarobust.corruptions import resizes as corruption_resizes
from vqarobust.models import exposes_attention

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan

# A per-model run_model job's attention table: an output beside its subsets' predictions.
ATTENTION_OUTPUT = "attention"
ATTENTION_PATTERN = "results/{dataset}/attention/{model}.parquet"

# Kinds whose images are the clean eval split's: the question is what is perturbed.
_QUESTION_KINDS = ("clean", "text", "sentence", "ranker")


class InferStage:
    """What run_model and image_attention read; see the module's docstring."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    @property
    def per_model(self) -> bool:
        """Whether one run_model job answers all of a model's subsets."""
        return self.config["inference_jobs"] == "model"

    def model_subsets(self, model: str) -> list[str]:
        """Every subset ``model`` answers (the VQABQ chain last, for a chain model)."""
        plan = self.plan
        return [*plan.subsets, *([plan.chain] if model in plan.chain_models else [])]

    def job_subsets(self, wildcards: Any) -> list[str]:
        """The subsets of one run_model job: the one its ``subset`` wildcard names, or every
        subset of its model."""
        subset = getattr(wildcards, "subset", None)
        return [subset] if subset is not None else self.model_subsets(wildcards.model)

    def model_outputs(self) -> dict[str, str]:
        """A per-model job's outputs, named by subset, as patterns over ``{dataset}`` and
        ``{model}`` (every model answers the same subsets); then, when the study draws
        attention maps, the model's attention table (:meth:`attention_params`)."""
        names = {tuple(self.model_subsets(m)) for m in self.plan.model_names}
        assert len(names) == 1, "every model answers the same subsets"
        subsets = next(iter(names))
        if ATTENTION_OUTPUT in subsets:
            from vqarobust.plan.study import PlanError

            # A plugin may register a perturbation of that name: say which key to change.
            raise PlanError(
                f"corruptions / text.perturbations: a subset named {ATTENTION_OUTPUT!r} "
                "would clash with the attention table of each model's job; rename it"
            )
        pattern = "results/{{dataset}}/predictions/{{model}}/{}.parquet"
        out = {s: pattern.format(s) for s in subsets}
        if self.per_model and self.attention_models:
            out[ATTENTION_OUTPUT] = ATTENTION_PATTERN
        return out

    def job_input(self, wildcards: Any) -> dict[str, Any]:
        """A run_model job's inputs: the questions and the model's checkpoint, and each
        subset's files named ``<kind>__<subset>`` (images, question_sets, features,
        swaps), which the script reads back by name; a per-model job that draws attention
        maps, the image folders of :meth:`attention_subsets` as ``attention_images``."""
        out: dict[str, Any] = {}
        for subset in self.job_subsets(wildcards):
            one = SimpleNamespace(dataset=self.plan.dataset, model=wildcards.model, subset=subset)
            for key, value in self.infer_input(one).items():
                shared = key in ("questions", "model", "logs")
                out[key if shared else f"{key}__{subset}"] = value
        if self.attention_params(wildcards) is not None:
            plan = self.plan
            folders = [plan.image_folder(p, s) for p, s in self.attention_subsets(wildcards)]
            out["attention_images"] = folders
        return out

    def job_params(self, wildcards: Any) -> dict[str, dict[str, Any]]:
        """Each subset of the job, in its outputs' order: its modality and severities."""
        out = {}
        for subset in self.job_subsets(wildcards):
            one = SimpleNamespace(subset=subset)
            out[subset] = {
                "modality": self.modality(one),
                "severities": self.subset_severities(one),
            }
        return out

    def modality(self, wildcards: Any) -> str:
        """The subset's modality: the catalogue's (a sentence rewrite, named in the
        config, is text; clean is clean)."""
        return self.plan.subset(wildcards.subset).modality

    def infer_input(self, wildcards: Any) -> dict[str, Any]:
        """A pixel model's inputs: the subset's image folders and question sets, and the
        model's checkpoint folder (a feature model's are :meth:`feature_infer_input`)."""
        plan = self.plan
        source = plan.feature_models.get(wildcards.model)
        if source is not None:
            return self.feature_infer_input(wildcards, source)
        inputs: dict[str, Any] = {"questions": plan.questions}
        kind = plan.subset(wildcards.subset).kind
        if kind == "context":
            # Every swap index of the perturbation: one question set, one image folder.
            inputs["images"] = [f"results/{plan.dataset}/context/images"]
            inputs["question_sets"] = [f"results/{plan.dataset}/context/{wildcards.subset}.parquet"]
        elif kind == "chain":
            inputs["images"] = [plan.image_folder("clean", 0)]
            inputs["question_sets"] = plan.text.chain_sets(wildcards.model)
        elif kind in _QUESTION_KINDS:
            inputs["images"] = [plan.image_folder("clean", 0)]
            if kind != "clean":
                inputs["question_sets"] = plan.question_sets(wildcards.subset)
        else:
            inputs["images"] = [
                plan.image_folder(wildcards.subset, s) for s in self.subset_severities(wildcards)
            ]
        inputs.update(plan.models.model_input(wildcards.model))
        inputs.update(self.imported_input(wildcards.model))
        return inputs

    def imported_input(self, model: str) -> dict[str, Any]:
        """An imported model's logs (and the exported dataset's card and data files, whose
        row order maps lmms-eval's doc_id), each file an input: a changed, added or
        removed log reruns its jobs (docs/interop.md)."""
        entry = self.config["models"][model]
        if entry["family"] != "imported":
            return {}
        from vqarobust.harness_logs import exported_files, log_files

        files = log_files(entry["logs"], entry.get("format", "lmms-eval"))
        if "exported" in entry:
            files += exported_files(entry["exported"])
        return {"logs": [self.plan.user_path(str(f)) for f in files]}

    def feature_infer_input(self, wildcards: Any, source: str) -> dict[str, Any]:
        """A feature model's inputs: the features of the subset's images (the eval split's
        for question perturbations), and the feature swaps for a context subset."""
        plan = self.plan
        features = plan.features
        inputs: dict[str, Any] = {"questions": plan.questions}
        subset = wildcards.subset
        kind = plan.subset(subset).kind
        if kind == "context":
            folder = f"results/{plan.dataset}/context/features/{source}"
            inputs["features"] = [features.feature_path(source, "eval")]
            inputs["question_sets"] = [f"{folder}/{subset}.parquet"]
            inputs["swaps"] = f"{folder}/swaps.parquet"
        elif kind == "chain":
            inputs["features"] = [features.feature_path(source, "eval")]
            inputs["question_sets"] = plan.text.chain_sets(wildcards.model)
        elif kind in _QUESTION_KINDS:
            inputs["features"] = [features.feature_path(source, "eval")]
            if kind != "clean":
                inputs["question_sets"] = plan.question_sets(subset)
        else:
            inputs["features"] = [
                features.image_feature_path(source, subset, s)
                for s in self.subset_severities(wildcards)
            ]
        inputs.update(plan.models.model_input(wildcards.model))
        return inputs

    def subset_severities(self, wildcards: Any) -> list[int] | None:
        """The severities one run_model job answers (clean is 0 alone, a control its one
        severity). A context subset has None: every swap index of its question set, known
        once the swaps are made."""
        severities = self.plan.subset(wildcards.subset).severities
        return None if severities is None else list(severities)

    # A classifier checkpoint other than ViLT gets an empty table and a log line at run time.
    @functools.cached_property
    def attention_models(self) -> list[str]:
        """The models whose adapter exposes attention over the image (none when the
        diagnostic asks for no questions)."""
        if not self.config["diagnostics"]["attention"]["n"]:
            return []
        models = self.config["models"]
        return [m for m in self.plan.model_names if exposes_attention(models[m])]

    def attention_params(self, wildcards: Any) -> dict[str, Any] | None:
        """What a per-model run_model job needs to draw its model's attention maps once it
        has answered, with the same weights (one load per model and run): the number of
        sampled questions, the seed and the (perturbation, severity) of each folder of
        ``attention_images``. None for a job that draws none: a per-subset job (the
        image_attention rule draws them), a study without maps, or a model whose family
        exposes no attention (its job writes the empty table)."""
        if not self.per_model or wildcards.model not in self.attention_models:
            return None
        return {
            "n": self.config["diagnostics"]["attention"]["n"],
            "seed": self.config["seed"],
            "subsets": [list(pair) for pair in self.attention_subsets(wildcards)],
        }

    def attention_subsets(self, wildcards: Any) -> list[tuple[str, int]]:
        """(perturbation, severity) of the clean and every corrupted image folder (no
        controls; no resizing corruption, whose token grid need not be the clean image's)."""
        plan = self.plan
        kept = [c for c in plan.corruptions if not corruption_resizes(c)]
        return [("clean", 0)] + [(c, s) for c in kept for s in plan.corruption_severities(c)]

    def attention_input(self, wildcards: Any) -> dict[str, Any]:
        """The questions, every image folder of :meth:`attention_subsets` and the model."""
        plan = self.plan
        inputs: dict[str, Any] = {
            "questions": plan.questions,
            "images": [plan.image_folder(p, s) for p, s in self.attention_subsets(wildcards)],
        }
        inputs.update(plan.models.model_input(wildcards.model))
        return inputs

    def attention_files(self, wildcards: Any) -> list[str]:
        """The attention table of every attention model (the analysis reads them)."""
        dataset = self.plan.dataset
        return [ATTENTION_PATTERN.format(dataset=dataset, model=m) for m in self.attention_models]

    def prediction_files(self, wildcards: Any) -> list[str]:
        """Every model's predictions on every subset, then the chain's of each chain model."""
        plan = self.plan
        root = f"results/{plan.dataset}/predictions"
        return [f"{root}/{m}/{s}.parquet" for m in plan.model_names for s in plan.subsets] + [
            f"{root}/{m}/{plan.chain}.parquet" for m in plan.chain_models
        ]

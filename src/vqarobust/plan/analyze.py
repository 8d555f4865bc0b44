"""The analyze stage: the run's options and the input functions of the analyze and
load_duckdb rules (rules/analyze.smk).

Every analysis (:mod:`vqarobust.analyses`) is its own job writing Parquet tables;
load_duckdb only assembles them. Each job's params are its frozen settings and the
digest of the package code it runs, so a setting or a code change reruns exactly the
analyses it touches (docs/workflow.md, "What reruns when").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vqarobust import corruptions, plugins, text
from vqarobust.analyses import registry
from vqarobust.analyses.base import Analysis, RunOptions, settings_params
from vqarobust.metrics.robustness import softmax_weights
from vqarobust.params import canonical

if TYPE_CHECKING:
    from vqarobust.db import DatabaseInputs
    from vqarobust.plan.study import StudyPlan

# The kinds of subset whose family the analyses group by (not clean, context or chain).
FAMILY_KINDS = ("corruption", "control", "text", "sentence", "ranker")


class AnalyzeStage:
    """The analyses a study runs, their inputs, settings and code digests."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    # The run's options ---------------------------------------------------------------

    def all_question_sets(self, wildcards: Any) -> list[str]:
        """Every perturbed question set: text perturbations, sentence rewrites, rankers."""
        plan = self.plan
        names = [*plan.text_perturbations, *plan.sentence, *plan.rankers]
        return [path for name in names for path in plan.question_sets(name)]

    def outside_metrics(self, wildcards: Any) -> list[str]:
        """Image perturbations kept out of the robustness metrics (docs/metrics.md): those
        tagged ``outside_vre``, unless ``vre.include_grayscale``."""
        if self.config["vre"]["include_grayscale"]:
            return []
        return [n for n in self.plan.corruptions if corruptions.outside_vre(n)]

    def image_folders(self, wildcards: Any) -> list[str]:
        """The folder of every image subset, for the report's sample grid (none when GQA
        is read without its images: then the report shows no image samples)."""
        return [self.plan.image_folder(p, s) for p, s in self.plan.image_subsets()]

    def families(self, wildcards: Any) -> dict[str, str]:
        """The family of every image, text and basic-question perturbation."""
        return {name: s.family for name, s in self.plan.catalogue.items() if s.kind in FAMILY_KINDS}

    def vqabq_input(self, wildcards: Any) -> dict[str, str]:
        """The VQABQ ranker's rankings, or {} when VQABQ is off."""
        v = self.plan.bq["vqabq"]
        if not v["enabled"]:
            return {}
        rankings = f"results/{self.plan.dataset}/questions/rankings/{v['ranker']}.parquet"
        return {"vqabq_rankings": rankings}

    def vqabq_params(self, wildcards: Any) -> dict[str, Any]:
        """VQABQ's settings (thresholds only change the tables), or {} when it is off."""
        v = self.plan.bq["vqabq"]
        if not v["enabled"]:
            return {}
        return canonical({k: v[k] for k in ("ranker", "thresholds", "grid", "tune_share")})

    def context_input(self, wildcards: Any) -> dict[str, Any]:
        """The swap tables (pixels: with the swapped images, for the report's flipped
        examples; one per feature source that a feature model reads)."""
        plan = self.plan
        if not plan.context_perturbations:
            return {}
        inputs: dict[str, Any] = {
            "feature_swaps": [
                f"results/{plan.dataset}/context/features/{s}/swaps.parquet"
                for s in plan.feature_sources
            ]
        }
        if plan.pixel_models:
            inputs["context_swaps"] = f"results/{plan.dataset}/context/swaps.parquet"
            inputs["context_images"] = f"results/{plan.dataset}/context/images"
        return inputs

    def ranker_methods(self, wildcards: Any) -> dict[str, str]:
        """How each basic-question perturbation is ranked, in words (the R_score tables)."""
        bq = self.plan.bq
        settings = text.ranking.RankSettings(
            k=bq["k"],
            alpha=bq["lasso_alpha"],
            prefilter=bq["prefilter"],
            lasso_mode=bq["lasso"]["mode"],
            lasso_lambda=bq["lasso"]["lambda"],
            exclude_main=bq["exclude_main"],
            bleu_smoothing=bq["bleu_smoothing"],
        )
        encoder = bq.get("encoder") or text.encoder.ENCODER_NAME
        return {n: text.ranking.describe_ranker(n, settings, encoder) for n in self.plan.rankers}

    @functools.cached_property
    def run_options(self) -> RunOptions:
        """Every setting any analysis reads, resolved once from the config."""
        plan, config = self.plan, self.config
        return RunOptions(
            metric=config["scoring"]["metric"],
            weights=softmax_weights(canonical(config["vre"]["preferences"])),
            families=self.families(None),
            rscore=canonical(config["rscore"]),
            seed=config["seed"],
            skipped=plan.skipped_text | plan.skipped_rankers | plan.skipped_weights,
            image_subsets=plan.image_subsets(),
            outside=self.outside_metrics(None),
            uncertainty=canonical(config["uncertainty"]),
            vqabq=self.vqabq_params(None),
            models=config["models"],
            features=config["features"],
            context=plan.context_perturbations,
            reliance_k=config["context"].get("reliance_k") or [config["context"]["k"]],
            feature_sources=plan.feature_sources if plan.context_perturbations else [],
            rankers=self.ranker_methods(None),
            flip_questions=config["geometric"]["flip_questions"],
            on_failed_answers=config["scoring"]["on_failed_answers"],
            max_unanswered_share=config["scoring"]["max_unanswered_share"],
            dropped_questions=config["text"]["dropped_questions"],
            prices=canonical(config.get("prices") or {}),
        )

    @functools.cached_property
    def analyses(self) -> dict[str, Analysis]:
        """The analyses this run makes, by name, in registry order."""
        return {a.name: a for a in registry.active(self.run_options)}

    # The analyze rule ------------------------------------------------------------------

    def tables_dir(self, name: str) -> str:
        """The folder of one analysis's tables."""
        return f"results/{self.plan.dataset}/tables/{name}"

    def tables_dirs(self) -> list[str]:
        """Every analysis's tables, which load_duckdb assembles."""
        return [self.tables_dir(name) for name in self.analyses]

    def _context_files(self, wildcards: Any) -> dict[str, Any]:
        inputs = self.context_input(wildcards)
        if "context_swaps" in inputs:
            inputs["clean_images"] = f"resources/datasets/{self.plan.dataset}/eval/images"
        return inputs

    @functools.cached_property
    def input_groups(self) -> dict[str, Callable[[Any], dict[str, Any]]]:
        """The workflow's files an analysis may read, by the group names analyses declare."""
        plan = self.plan
        return {
            "questions": lambda wc: {"questions": plan.questions},
            "info": lambda wc: {"info": f"resources/datasets/{plan.dataset}/eval/dataset.json"},
            "predictions": lambda wc: {"predictions": plan.infer.prediction_files(wc)},
            "question_sets": lambda wc: {"question_sets": self.all_question_sets(wc)},
            "images": lambda wc: {"images": self.image_folders(wc)},
            "attention": lambda wc: {"attention": plan.infer.attention_files(wc)},
            "context": self._context_files,
            "vqabq_rankings": self.vqabq_input,
            "lpips": lambda wc: {"lpips": plan.corrupt.lpips_files(wc)},
        }

    def analysis_input(self, wildcards: Any) -> dict[str, Any]:
        """The tables an analysis requires and the files of the groups it reads."""
        analysis = self.analyses[wildcards.analysis]
        inputs: dict[str, Any] = {f"tables_{r}": self.tables_dir(r) for r in analysis.requires}
        for group in analysis.inputs:
            inputs.update(self.input_groups[group](wildcards))
        return inputs

    def analysis_settings(self, wildcards: Any) -> dict[str, Any]:
        """An analysis's frozen settings, as params."""
        return settings_params(self.analyses[wildcards.analysis].settings(self.run_options))

    def analysis_code(self, wildcards: Any) -> str:
        """The code digest of one analysis job, computed once per plan
        (:meth:`StudyPlan.once`): the digest walks the package's import graph. A plugin's
        analysis: the digest of its own source (:mod:`vqarobust.plugins`)."""
        module = self.analyses[wildcards.analysis].module
        return self.plan.once(("analysis", module), plugins.module_digest, module)

    def database_inputs(self) -> DatabaseInputs:
        """The files every analysis reads, for :func:`vqarobust.db.build_database` in a
        notebook or test (paths relative to the workflow's working directory)."""
        from vqarobust.db import DatabaseInputs

        plan, context = self.plan, self._context_files(None)
        features = dict(zip(plan.feature_sources, context.get("feature_swaps", []), strict=True))
        pixels = {
            k: context[f"context_{k}"] for k in ("swaps", "images") if f"context_{k}" in context
        }
        if "clean_images" in context:
            pixels["clean"] = context["clean_images"]
        return DatabaseInputs(
            questions_path=plan.questions,
            prediction_paths=plan.infer.prediction_files(None),
            dataset_info_path=f"resources/datasets/{plan.dataset}/eval/dataset.json",
            question_set_paths=self.all_question_sets(None),
            image_subsets=[(p, s, plan.image_folder(p, s)) for p, s in plan.image_subsets()],
            attention_paths=plan.infer.attention_files(None),
            context=({**pixels, "feature_swaps": features} if context else None),
            vqabq_rankings=self.vqabq_input(None).get("vqabq_rankings"),
            lpips_paths=plan.corrupt.lpips_files(None),
        )

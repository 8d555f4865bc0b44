"""The results file: every analysis's tables in one DuckDB file (docs/workflow.md).

Table names are part of the interface (docs/workflow.md lists them, each with the
analysis that writes it: :mod:`vqarobust.analyses`). Every subset is a (modality,
perturbation, severity); clean rows are modality ``clean``, perturbation ``clean``,
severity 0. Reports read only this file. The workflow runs each analysis as its own job
and assembles the file (:func:`vqarobust.analyses.assemble.assemble_database`);
:func:`build_database` does both in one process, for tests, benchmarks and notebooks.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vqarobust.analyses.base import RunOptions
from vqarobust.analyses.runner import run_all
from vqarobust.metrics.rscore import DEFAULT_MAXIMUM, DEFAULT_TOLERANCE
from vqarobust.metrics.uncertainty import Settings

if TYPE_CHECKING:
    from vqarobust.plan import StudyPlan


@dataclass(frozen=True)
class DatabaseInputs:
    """The files the analyses read: the prepared questions, the models' predictions,
    ``dataset_info_path`` (the prepared ``dataset.json``), the perturbed
    ``question_set_paths``, ``image_subsets`` as (perturbation, severity, folder), the
    ``attention_paths`` maps, ``context`` (keys ``swaps``, ``images``, ``clean``,
    ``feature_swaps``: source -> swap table), the VQABQ ranker's ``vqabq_rankings`` and
    the corrupted subsets' ``lpips_paths`` (tables of ``score_lpips``)."""

    questions_path: str | os.PathLike[str]
    prediction_paths: Sequence[str | os.PathLike[str]]
    dataset_info_path: str | os.PathLike[str] | None = None
    question_set_paths: Sequence[str | os.PathLike[str]] = ()
    image_subsets: Sequence[tuple[str, int, str | os.PathLike[str]]] = ()
    attention_paths: Sequence[str | os.PathLike[str]] = ()
    context: Mapping[str, Any] | None = None
    vqabq_rankings: str | os.PathLike[str] | None = None
    lpips_paths: Sequence[str | os.PathLike[str]] = ()

    def files(self) -> dict[str, list[str]]:
        """The files by the input names of :func:`vqarobust.analyses.runner.run_all`."""
        context = dict(self.context or {})
        return {
            "questions": [str(self.questions_path)],
            "info": [str(self.dataset_info_path)] if self.dataset_info_path else [],
            "predictions": [str(p) for p in self.prediction_paths],
            "question_sets": [str(p) for p in self.question_set_paths],
            "images": [str(f) for _, _, f in self.image_subsets],
            "attention": [str(p) for p in self.attention_paths],
            "context_swaps": [str(context["swaps"])] if context.get("swaps") else [],
            "context_images": [str(context["images"])] if context.get("images") else [],
            "clean_images": [str(context["clean"])] if context.get("clean") else [],
            "feature_swaps": [str(p) for p in (context.get("feature_swaps") or {}).values()],
            "vqabq_rankings": [str(self.vqabq_rankings)] if self.vqabq_rankings else [],
            "lpips": [str(p) for p in self.lpips_paths],
        }


def build_database(
    db_path: str | os.PathLike[str],
    inputs: DatabaseInputs,
    config: Mapping[str, Any] | None = None,
    plan: StudyPlan | None = None,
    **settings: Any,
) -> dict[str, int]:
    """Run every analysis on the ``inputs`` files and write ``db_path``; returns row counts.

    With a study ``plan`` (:class:`vqarobust.plan.StudyPlan`, as the workflow builds it)
    the analyses run with the workflow's own options (``plan.analyze.run_options``), less
    what the ``inputs`` files decide (their image subsets and context tables); its config
    is the one hashed into provenance. Otherwise ``settings`` are
    :class:`~vqarobust.analyses.base.RunOptions` fields (``metric``, ``weights``,
    ``families``, ``seed``, ``outside``, ``on_missing``, ``vqabq``, ...; ``uncertainty``
    may be a :class:`~vqarobust.metrics.uncertainty.Settings`, ``rscore_tolerance`` /
    ``rscore_maximum`` the ``rscore`` section's keys), and ``config`` is hashed into
    provenance and gives ``model_inputs`` its models.
    """
    if plan is not None:
        if settings:
            raise TypeError(f"build_database: a plan sets every option; got {sorted(settings)}")
        context = dict(inputs.context or {})
        options = dataclasses.replace(
            plan.analyze.run_options,
            image_subsets=[(p, int(s)) for p, s, _ in inputs.image_subsets],
            context=plan.context_perturbations if context else [],
            feature_sources=list(context.get("feature_swaps") or {}),
        )
        return run_all(db_path, options, inputs.files(), plan.config)
    if "outside_metrics" in settings:
        settings["outside"] = list(settings.pop("outside_metrics"))
    if isinstance(settings.get("uncertainty"), Settings):
        settings["uncertainty"] = vars(settings["uncertainty"])
    rscore = {
        "tolerance": settings.pop("rscore_tolerance", DEFAULT_TOLERANCE),
        "maximum": settings.pop("rscore_maximum", DEFAULT_MAXIMUM),
    }
    if config is not None:
        settings.setdefault("models", config.get("models", {}))
        settings.setdefault("features", config.get("features", {}))
        context_settings = config.get("context", {})
        # A validated config has context.k (the schema's default); reliance at its k.
        ks = context_settings.get("reliance_k") or context_settings.get("k")
        if ks is not None:
            settings.setdefault("reliance_k", list(ks) if isinstance(ks, list) else [ks])
    context = dict(inputs.context or {})
    options = RunOptions(
        rscore=rscore,
        image_subsets=[(p, int(s)) for p, s, _ in inputs.image_subsets],
        context=["swaps"] if context else [],
        feature_sources=list(context.get("feature_swaps") or {}),
        **settings,
    )
    return run_all(db_path, options, inputs.files(), config)

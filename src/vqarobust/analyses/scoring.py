"""Scoring: every prediction scored against its question's answers, after the fidelity
filter (docs/text.md); the question sets and what the run skipped."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from vqarobust import store
from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics.coverage import fidelity_drops
from vqarobust.metrics.vqa_accuracy import score_predictions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """``scoring.metric``; the perturbations the run skipped, with the reason."""

    metric: str
    skipped: Mapping[str, str]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(options.metric, dict(options.skipped))


def read_predictions(paths: list[str]) -> pl.DataFrame:
    """Concatenate prediction Parquet files; duplicate (model, modality, perturbation,
    severity, question_id) rows are an error, since they would silently weigh some
    questions twice."""
    if not paths:
        raise ValueError("no prediction files given")
    df = pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")
    missing = set(store.PREDICTION_SCHEMA.names) - set(df.columns)
    if missing:
        raise ValueError(f"prediction files lack columns {sorted(missing)}")
    keys = ["model", "modality", "perturbation", "severity", "question_id"]
    dup = df.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise ValueError(f"{dup.height} duplicated predictions, e.g.\n{dup.head(5)}")
    return df


def read_question_sets(paths: list[str]) -> pl.DataFrame:
    """The perturbed question sets, one table (``store.QUESTION_SET_SCHEMA``)."""
    frames = [pl.read_parquet(p) for p in paths]
    if not frames:
        return pl.from_arrow(store.QUESTION_SET_SCHEMA.empty_table())
    return pl.concat(frames, how="vertical_relaxed")


def _skipped_tables(info_path: str | None, skipped: Mapping[str, str]) -> dict[str, Table]:
    info = json.loads(Path(info_path).read_text(encoding="utf-8")) if info_path else {}
    images = pl.DataFrame(info.get("skipped_images", []),
                          schema={"image_id": pl.Int64, "reason": pl.String})  # fmt: skip
    perturbations = pl.DataFrame(
        [{"perturbation": k, "reason": v} for k, v in skipped.items()],
        schema={"perturbation": pl.String, "reason": pl.String},
    )
    return {"skipped_images": Table(images), "skipped_perturbations": Table(perturbations)}


def run(inputs: Inputs, settings: Settings) -> Result:
    """Score the predictions; questions some perturbed set dropped leave every table."""
    questions_path = inputs.one("questions")
    questions = pl.from_arrow(store.read_questions(questions_path))
    predictions = read_predictions(inputs.many("predictions"))
    unknown = predictions.join(questions.select("question_id"), on="question_id", how="anti")
    if unknown.height:
        raise ValueError(
            f"{unknown.height} predictions refer to question ids not in {questions_path}"
        )
    scored = score_predictions(predictions, questions, settings.metric)
    sets = read_question_sets(inputs.many("question_sets"))
    drops, dropped_ids = fidelity_drops(sets)
    result = Result(info={"metric": settings.metric})
    if dropped_ids:
        # Paired comparisons need one question set for every subset (docs/text.md).
        keep = ~pl.col("question_id").is_in(dropped_ids)
        questions, scored = questions.filter(keep), scored.filter(keep)
        result.warnings.append(
            f"fidelity filter (on_low_similarity: drop): {len(dropped_ids)} questions some "
            "perturbed set dropped are left out of every table, clean and image subsets "
            f"included; {questions.height} questions remain (table fidelity_drops)"
        )
        log.warning("%s", result.warnings[-1])
    projected = scored.select(
        "model", "modality", "perturbation", pl.col("severity").cast(pl.Int16), "question_id",
        "answer", "score", "truncated",
    )  # fmt: skip
    result.tables = {
        "questions": Table(questions),
        "predictions": Table(projected, ordered=True),
        "question_sets": Table(sets, ordered=True),
        "fidelity_drops": Table(drops, ordered=True),
        **_skipped_tables(inputs.one("info"), settings.skipped),
        "_scored": Table(scored),
        "_questions": Table(questions),
    }
    return result


ANALYSIS = Analysis(
    name="scoring",
    doc=__doc__,
    tables={
        "questions": "the evaluated questions (after the fidelity filter)",
        "predictions": "every scored prediction (model, subset, question, answer, score)",
        "question_sets": "the perturbed questions",
        "fidelity_drops": "questions a perturbed set dropped, and why",
        "skipped_images": "images the dataset adapter skipped",
        "skipped_perturbations": "configured perturbations that could not run here",
    },
    settings_type=Settings,
    run=run,
    inputs=("questions", "info", "predictions", "question_sets"),
)

"""Scoring: every prediction scored against its question's answers, after the fidelity
filter (docs/text.md) and, with a horizontal_flip subset, the flip's question marking
(:mod:`vqarobust.metrics.flip`); the question sets and what the run skipped."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from vqarobust import store
from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics import flip
from vqarobust.metrics.answer_status import (
    flagged_sentence,
    status_counts,
    unanswered_rows,
    with_status,
)
from vqarobust.metrics.coverage import fidelity_drops
from vqarobust.metrics.vqa_accuracy import score_predictions
from vqarobust.models.replies import ANSWERED

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """``scoring.metric``; the perturbations the run skipped, with the reason; how the
    horizontal flip's marked questions are scored (``geometric.flip_questions``)."""

    metric: str
    skipped: Mapping[str, str]
    flip_questions: str = "flip_answers"
    on_failed_answers: str = "fail"
    max_unanswered_share: float = 0.01
    dropped_questions: str = "every_table"

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(
            options.metric,
            dict(options.skipped),
            options.flip_questions,
            options.on_failed_answers,
            options.max_unanswered_share,
            options.dropped_questions,
        )


def read_predictions(paths: list[str]) -> pl.DataFrame:
    """Concatenate prediction Parquet files; duplicate (model, modality, perturbation,
    severity, question_id) rows are an error, since they would silently weigh some
    questions twice."""
    if not paths:
        raise ValueError("no prediction files given")
    frames = [pl.read_parquet(p) for p in paths]
    without = [p for p, f in zip(paths, frames, strict=True) if "raw_answer" not in f.columns]
    if without:
        log.warning(
            "%d of %d prediction files hold no raw replies (written before replies "
            "were kept, or by another tool), e.g. %s: raw_answer is null for their "
            "rows",
            len(without),
            len(paths),
            without[0],
        )
    df = pl.concat([_with_raw_answer(f) for f in frames], how="vertical_relaxed")
    # Files of another tool may lack statuses (metrics.answer_status.with_status).
    missing = set(store.PREDICTION_SCHEMA.names) - set(df.columns) - {"status", "finish_reason"}
    if missing:
        raise ValueError(f"prediction files lack columns {sorted(missing)}")
    keys = ["model", "modality", "perturbation", "severity", "question_id"]
    dup = df.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise ValueError(f"{dup.height} duplicated predictions, e.g.\n{dup.head(5)}")
    return df


def _with_raw_answer(df: pl.DataFrame) -> pl.DataFrame:
    # Predictions written by another tool, or before replies were kept, hold no raw
    # reply: null, as for a classifier's label (the export shows it as such).
    if "raw_answer" in df.columns:
        return df
    return df.with_columns(pl.lit(None, pl.String).alias("raw_answer"))


def read_question_sets(paths: list[str]) -> pl.DataFrame:
    """The perturbed question sets, one table (``store.QUESTION_SET_SCHEMA``)."""
    frames = [pl.read_parquet(p) for p in paths]
    if not frames:
        return pl.from_arrow(store.QUESTION_SET_SCHEMA.empty_table())
    return pl.concat(frames, how="vertical_relaxed")


def _skipped_tables(info_path: str | None, skipped: Mapping[str, str]) -> dict[str, Table]:
    info = json.loads(Path(info_path).read_text(encoding="utf-8")) if info_path else {}
    images = pl.DataFrame(
        info.get("skipped_images", []), schema={"image_id": pl.Int64, "reason": pl.String}
    )
    perturbations = pl.DataFrame(
        [{"perturbation": k, "reason": v} for k, v in skipped.items()],
        schema={"perturbation": pl.String, "reason": pl.String},
    )
    return {"skipped_images": Table(images), "skipped_perturbations": Table(perturbations)}


FLIP_MARKS_SCHEMA = {"question_id": pl.Int64, "kind": pl.String, "treatment": pl.String}


def score_flip(
    predictions: pl.DataFrame, scored: pl.DataFrame, questions: pl.DataFrame, settings: Settings
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The scores with the horizontal_flip subset's ``answer`` questions rescored against
    their swapped answers (policy ``flip_answers``), and the marked questions with their
    treatment (``scored_flipped`` or ``left_out``). Without a flip subset: unchanged, and
    no marks."""
    if not (predictions["perturbation"] == flip.HORIZONTAL_FLIP).any():
        return scored, pl.DataFrame(schema=FLIP_MARKS_SCHEMA)
    marks = flip.mark(questions)
    out = set(flip.left_out(marks, settings.flip_questions)["question_id"].to_list())
    marks = marks.with_columns(
        pl.when(pl.col("question_id").is_in(sorted(out)))
        .then(pl.lit("left_out"))
        .otherwise(pl.lit("scored_flipped"))
        .alias("treatment")
    )
    rescore = marks.filter(pl.col("treatment") == "scored_flipped")["question_id"].to_list()
    if not rescore:
        return scored, marks
    chosen = (pl.col("perturbation") == flip.HORIZONTAL_FLIP) & pl.col("question_id").is_in(rescore)
    flipped = flip.flipped_answers(questions, rescore)
    # score_predictions keeps the predictions' order: rows are matched by position.
    rescored = score_predictions(
        predictions.with_row_index("_flip_row").filter(chosen), flipped, settings.metric
    )
    kept = scored.with_row_index("_flip_row").filter(~chosen)
    merged = pl.concat([kept, rescored.select(kept.columns)]).sort("_flip_row")
    return merged.drop("_flip_row"), marks


def answered_rows(
    predictions: pl.DataFrame, settings: Settings
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, str | None]:
    """The rows that are the model's answer, the status counts, the other rows and the
    sentence naming the flagged cells; a flagged cell stops here with
    ``on_failed_answers: fail``."""
    predictions = with_status(predictions)
    counts = status_counts(predictions, settings.max_unanswered_share)
    flagged = flagged_sentence(counts, settings.max_unanswered_share)
    if flagged and settings.on_failed_answers == "fail":
        raise ValueError(
            f"{flagged}. Stopped (scoring.on_failed_answers: fail): fix the cause and rerun "
            "`snakemake --forcerun run_model` (finished chunks are reused, failed requests "
            "asked again), or set scoring.on_failed_answers: skip to report without them"
        )
    answered = predictions.filter(pl.col("status") == ANSWERED)
    return answered, counts, unanswered_rows(predictions), flagged


def _flip_warning(flip_marks: pl.DataFrame, n_out: int, settings: Settings) -> str:
    # As with the fidelity filter: paired subsets need one question set, so a question
    # left out of the flipped subset leaves every table.
    return (
        f"horizontal_flip (flip_questions: {settings.flip_questions}): of the "
        f"{flip_marks.height} questions a flip changes, {flip_marks.height - n_out} are "
        f"scored against their swapped answers on the flipped images and {n_out} are left "
        "out of every table (table flip_marks)"
    )


def _drop_warning(dropped: int, remaining: int, settings: Settings) -> str:
    if settings.dropped_questions == "own_set":
        return (
            f"fidelity filter (on_low_similarity: drop, dropped_questions: own_set): {dropped} "
            "questions are missing from some perturbed set (table fidelity_drops); each set's "
            "accuracy is over the questions it kept, every other table keeps them"
        )
    return (
        f"fidelity filter (on_low_similarity: drop): {dropped} questions some perturbed set "
        "dropped are left out of every table, clean and image subsets included; "
        f"{remaining} questions remain (table fidelity_drops)"
    )


def run(inputs: Inputs, settings: Settings) -> Result:
    """Score the model's answers; requests without an answer are counted apart
    (:mod:`vqarobust.metrics.answer_status`); questions some perturbed set dropped leave
    every table, or only their own sets (``text.dropped_questions``)."""
    questions_path = inputs.one("questions")
    questions = pl.from_arrow(store.read_questions(questions_path))
    raw = read_predictions(inputs.many("predictions"))
    predictions, counts, unanswered, flagged = answered_rows(raw, settings)
    unknown = predictions.join(questions.select("question_id"), on="question_id", how="anti")
    if unknown.height:
        raise ValueError(
            f"{unknown.height} predictions refer to question ids not in {questions_path}"
        )
    scored = score_predictions(predictions, questions, settings.metric)
    scored, flip_marks = score_flip(predictions, scored, questions, settings)
    sets = read_question_sets(inputs.many("question_sets"))
    drops, dropped_ids = fidelity_drops(sets)
    result = Result(info={"metric": settings.metric})
    flip_out = flip_marks.filter(pl.col("treatment") == "left_out")["question_id"].to_list()
    # Paired comparisons need one question set for every subset (docs/text.md), unless
    # the study removes a dropped question from its own set only.
    out = [*(dropped_ids if settings.dropped_questions == "every_table" else []), *flip_out]
    if out:
        keep = ~pl.col("question_id").is_in(out)
        questions, scored = questions.filter(keep), scored.filter(keep)
    warnings = [
        flagged,
        _flip_warning(flip_marks, len(flip_out), settings) if flip_marks.height else None,
        _drop_warning(len(dropped_ids), questions.height, settings) if dropped_ids else None,
    ]
    for warning in filter(None, warnings):
        result.warnings.append(warning)
        log.warning("%s", warning)
    columns = ["model", "modality", "perturbation", "severity", "question_id", "answer"]
    projected = scored.select(*columns, "raw_answer", "score", "truncated").with_columns(
        pl.col("severity").cast(pl.Int16)
    )
    result.tables = {
        "questions": Table(questions),
        "predictions": Table(projected, ordered=True),
        "question_sets": Table(sets, ordered=True),
        "fidelity_drops": Table(drops, ordered=True),
        "flip_marks": Table(flip_marks, ordered=True),
        "answer_status": Table(counts, ordered=True),
        "unanswered": Table(unanswered, ordered=True),
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
        "flip_marks": "questions a horizontal flip changes, their kind and treatment",
        "answer_status": "per model and subset, requests answered and why the others were not",
        "unanswered": "every request without the model's answer: its status and raw reply",
        "skipped_images": "images the dataset adapter skipped",
        "skipped_perturbations": "configured perturbations that could not run here",
    },
    settings_type=Settings,
    run=run,
    inputs=("questions", "info", "predictions", "question_sets"),
)

"""How many of each cell's requests got the model's own answer, and why the others did
not (:mod:`vqarobust.models.replies`). Only answered rows are scored; a cell whose share of
other rows passes ``scoring.max_unanswered_share`` is flagged, and with
``scoring.on_failed_answers: fail`` stops the run (docs/metrics.md, "Answer status")."""

from __future__ import annotations

import logging

import polars as pl

from vqarobust.models.replies import ANSWERED, EMPTY, STATUSES

log = logging.getLogger(__name__)

CELL = ["model", "modality", "perturbation", "severity"]
ON_FAILED = ("fail", "skip")


def with_status(predictions: pl.DataFrame) -> pl.DataFrame:
    """``predictions`` with ``status`` and ``finish_reason`` columns. Rows written by
    another tool, or before statuses were kept, hold none (no column, or null): there a
    blank answer is ``empty`` and any other ``answered`` (a warning counts the rows)."""
    if "finish_reason" not in predictions.columns:
        predictions = predictions.with_columns(pl.lit(None, pl.String).alias("finish_reason"))
    blank = pl.col("answer").is_null() | (pl.col("answer").str.strip_chars() == "")
    derived = pl.when(blank).then(pl.lit(EMPTY)).otherwise(pl.lit(ANSWERED))
    if "status" not in predictions.columns:
        predictions = predictions.with_columns(pl.lit(None, pl.String).alias("status"))
    missing = predictions["status"].null_count()
    if missing:
        log.warning(
            "%d predictions carry no status (written before statuses were kept, or by "
            "another tool): blank answers count as empty, the others as answered",
            missing,
        )
        predictions = predictions.with_columns(pl.col("status").fill_null(derived))
    unknown = predictions.filter(~pl.col("status").is_in(STATUSES))
    if unknown.height:
        bad = unknown["status"].unique().to_list()[:5]
        raise ValueError(f"{unknown.height} predictions have an unknown status, e.g. {bad}")
    return predictions


def status_counts(predictions: pl.DataFrame, max_share: float) -> pl.DataFrame:
    """Per cell (model, modality, perturbation, severity): ``rows``, one count column per
    status, ``unanswered`` (rows not answered), its ``unanswered_share``, and ``flagged``
    when that share passes ``max_share``."""
    counts = predictions.group_by(CELL).agg(
        pl.len().alias("rows"),
        *[(pl.col("status") == s).sum().cast(pl.Int64).alias(s) for s in STATUSES],
    )
    return (
        counts.with_columns((pl.col("rows") - pl.col(ANSWERED)).alias("unanswered"))
        .with_columns((pl.col("unanswered") / pl.col("rows")).alias("unanswered_share"))
        .with_columns((pl.col("unanswered_share") > max_share).alias("flagged"))
        .sort(CELL)
    )


def unanswered_rows(predictions: pl.DataFrame) -> pl.DataFrame:
    """Every row that is not the model's answer, named by cell and question id, with its
    status, the server's finish reason and the raw reply."""
    return (
        predictions.filter(pl.col("status") != ANSWERED)
        .select(*CELL, "question_id", "status", "finish_reason", "raw_answer")
        .sort([*CELL, "question_id"])
    )


def flagged_sentence(counts: pl.DataFrame, max_share: float) -> str | None:
    """The warning that names the flagged cells (None when none is), each with its share
    and the statuses behind it."""
    flagged = counts.filter(pl.col("flagged"))
    if not flagged.height:
        return None
    total = int(flagged["unanswered"].sum())
    return (
        f"answer status: {flagged.height} cells have more than {max_share:.1%} of their "
        f"requests without the model's answer ({total} rows, left out of every metric; "
        f"tables answer_status and unanswered): {flagged_cells(flagged)}"
    )


def flagged_cells(flagged: pl.DataFrame) -> str:
    """Each flagged cell of an ``answer_status`` table with its share and statuses."""
    cells = []
    for row in flagged.filter(pl.col("flagged")).iter_rows(named=True):
        why = ", ".join(f"{row[s]} {s}" for s in STATUSES if s != ANSWERED and row[s])
        cells.append(
            f"{row['model']} on {row['perturbation']}/{row['severity']} "
            f"({row['unanswered']} of {row['rows']} unanswered: {why})"
        )
    return "; ".join(cells)

"""Metric tables for accuracy results from anywhere (CSV or Parquet long tables).

The input holds ``model, perturbation, severity, accuracy`` (severity 0 = clean; a clean
row may appear once per model, or once per model and perturbation). Problems are reported
with the offending rows rather than silently fixed.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from vqarobust import store
from vqarobust.metrics.accuracy import accuracy_by
from vqarobust.metrics.mmi import mmi_table
from vqarobust.metrics.robustness import CLEAN, RobustnessWarning, robustness_tables
from vqarobust.spreadsheets import write_csv

log = logging.getLogger(__name__)
COLUMNS = ("model", "perturbation", "severity", "accuracy")


class TableError(ValueError):
    """The accuracy table is malformed; the message shows the offending rows."""


def read_accuracy_table(path: str | os.PathLike[str]) -> pl.DataFrame:
    """Read and validate a long accuracy table; clean rows get perturbation ``clean``."""
    df = read_table(path)
    if is_per_question(df):
        # The accuracy kernel of the workflow's tables and intervals, on validated rows.
        scored, _ = per_question_rows(df, str(path), cluster="question")
        df = accuracy_by(scored, ["model", "perturbation", "severity"])
    return validate_accuracy_table(df, str(path))


def _typed(df: pl.DataFrame, numbers: dict[str, pl.DataType], message: str) -> pl.DataFrame:
    """``model`` and ``perturbation`` as text, ``numbers`` cast strictly (a value that is not
    a number is a :class:`TableError` with ``message``, never a silent null)."""
    try:
        return df.with_columns(
            pl.col("model").cast(pl.String),
            pl.col("perturbation").cast(pl.String),
            *(pl.col(c).cast(t, strict=True) for c, t in numbers.items()),
        )
    except pl.exceptions.PolarsError as exc:
        raise TableError(f"{message} ({exc})") from None


def validate_accuracy_table(df: pl.DataFrame, source: str = "table") -> pl.DataFrame:
    """Check columns, ranges, duplicates and clean rows; return the normalized table."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TableError(f"{source}: missing columns {missing}; found {df.columns}")
    numbers = {"severity": pl.Int64, "accuracy": pl.Float64}
    df = _typed(df, numbers, f"{source}: severity must be integer and accuracy numeric")
    df = df.select(*COLUMNS)
    nulls = df.filter(pl.any_horizontal(pl.all().is_null()))
    if nulls.height:
        raise TableError(f"{source}: empty cells in rows:\n{nulls}")
    bad = df.filter(~pl.col("accuracy").is_between(0, 1))
    if bad.height:
        raise TableError(f"{source}: accuracy outside [0, 1] in rows:\n{bad}")
    bad = df.filter(~pl.col("severity").is_between(0, 5))
    if bad.height:
        raise TableError(f"{source}: severity outside 0..5 in rows:\n{bad}")
    # A clean row may name its perturbation or "clean"; either way it is the clean score.
    clean = df.filter(pl.col("severity") == 0)
    per_model = clean.group_by("model").agg(pl.col("accuracy").n_unique().alias("values"))
    conflicting = per_model.filter(pl.col("values") > 1)["model"].to_list()
    if conflicting:
        rows = clean.filter(pl.col("model").is_in(conflicting)).sort("model")
        raise TableError(f"{source}: clean accuracies disagree for a model:\n{rows}")
    keys = ["model", "perturbation", "severity"]
    dup = df.filter(pl.col("severity") > 0).filter(pl.len().over(keys) > 1)
    disagree = dup.filter(pl.col("accuracy").n_unique().over(keys) > 1)
    if disagree.height:
        raise TableError(f"{source}: duplicate rows that disagree:\n{disagree.sort(keys)}")
    if dup.height:
        log.warning(
            "%s: dropped %d duplicate rows that agree", source, dup.height - dup.unique().height
        )
    models = set(df["model"])
    no_clean = sorted(models - set(clean["model"]))
    if no_clean:
        rows = df.filter(pl.col("model").is_in(no_clean)).head(10)
        raise TableError(f"{source}: no clean accuracy (severity 0) for models {no_clean}:\n{rows}")
    corrupted = df.filter(pl.col("severity") > 0).unique(keys)
    clean_rows = (
        clean.group_by("model")
        .agg(pl.col("accuracy").first())
        .with_columns(pl.lit(CLEAN).alias("perturbation"), pl.lit(0, pl.Int64).alias("severity"))
    )
    return pl.concat([clean_rows.select(*COLUMNS), corrupted.select(*COLUMNS)]).sort(keys)


QUESTION_COLUMNS = ("model", "perturbation", "severity", "question_id", "score")


def is_per_question(df: pl.DataFrame) -> bool:
    """Whether a table holds one row per question (``question_id`` and ``score``)."""
    return {"question_id", "score"} <= set(df.columns)


def read_table(path: str | os.PathLike[str]) -> pl.DataFrame:
    """Read a CSV, TSV or Parquet table as it is."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pl.read_parquet(path)
    if suffix in {".csv", ".tsv"}:
        return pl.read_csv(path, separator="\t" if suffix == ".tsv" else ",")
    raise TableError(f"{path}: expected a .csv, .tsv or .parquet file")


def per_question_rows(
    df: pl.DataFrame, source: str = "table", cluster: str = "image"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Scored predictions and questions from a per-question table (``QUESTION_COLUMNS``,
    plus ``image_id`` for image clusters, optional ``question_type``/``answer_type``).

    Severity-0 rows are the clean subset (modality and perturbation ``clean``); a clean
    row repeated per perturbation must agree. Everything else is the image modality."""
    need = [*QUESTION_COLUMNS, *(["image_id"] if cluster == "image" else [])]
    missing = [c for c in need if c not in df.columns]
    if missing:
        hint = " (or cluster by question)" if missing == ["image_id"] else ""
        raise TableError(f"{source}: per-question rows lack columns {missing}{hint}")
    numbers = {"severity": pl.Int64, "question_id": pl.Int64, "score": pl.Float64}
    df = _typed(df, numbers, f"{source}: severity, question_id and score must be numbers")
    bad = df.filter(
        ~pl.col("score").is_between(0, 1)
        | ~pl.col("severity").is_between(0, 5)
        | pl.any_horizontal(pl.col(list(need)).is_null())
    )
    if bad.height:
        raise TableError(
            f"{source}: empty cells, scores outside [0, 1] or severities outside "
            f"0..5 in rows:\n{bad.head(10)}"
        )
    clean = df.filter(pl.col("severity") == 0)
    conflict = clean.group_by("model", "question_id").agg(pl.col("score").n_unique().alias("k"))
    if conflict.filter(pl.col("k") > 1).height:
        raise TableError(
            f"{source}: clean scores of a question disagree:\n"
            f"{conflict.filter(pl.col('k') > 1).head(10)}"
        )
    keys = ["model", "perturbation", "severity", "question_id"]
    dup = df.filter(pl.col("severity") > 0).filter(pl.len().over(keys) > 1)
    if dup.height:
        raise TableError(f"{source}: duplicate per-question rows:\n{dup.head(10)}")
    scored = pl.concat(
        [
            clean.unique(["model", "question_id"], keep="first").with_columns(
                pl.lit("clean").alias("modality"), pl.lit(CLEAN).alias("perturbation")
            ),
            df.filter(pl.col("severity") > 0).with_columns(pl.lit("image").alias("modality")),
        ]
    ).select(
        "model",
        "modality",
        "perturbation",
        pl.col("severity").cast(pl.Int16),
        "question_id",
        pl.lit("").alias("answer"),
        "score",
    )
    qcols = [
        "question_id",
        *(c for c in ("image_id", "question_type", "answer_type") if c in df.columns),
    ]
    questions = df.select(qcols).unique("question_id", keep="first").sort("question_id")
    if "image_id" not in questions.columns:
        questions = questions.with_columns(pl.col("question_id").alias("image_id"))
    for col in ("question_type", "answer_type"):
        if col not in questions.columns:
            questions = questions.with_columns(pl.lit("all").alias(col))
    return scored, questions


def write_metric_tables(
    accuracy: pl.DataFrame,
    out_dir: str | os.PathLike[str],
    weights: Mapping[str, float] | None = None,
    families: Mapping[str, str] | None = None,
    extra: Mapping[str, pl.DataFrame] | None = None,
) -> dict[str, pl.DataFrame]:
    """Compute and write accuracy, submetrics, vre_model, vre_perturbation and mmi as CSV,
    and any ``extra`` tables (e.g. the uncertainty tables) beside them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RobustnessWarning)
        t = robustness_tables(accuracy, weights)
        mmi = mmi_table(accuracy, families)
    for w in caught:
        log.warning("%s", w.message)
    tables = {
        "accuracy": accuracy,
        "submetrics": t.submetrics,
        "vre_model": t.vre_model,
        "vre_perturbation": t.vre_perturbation,
        "mmi": mmi,
        **dict(extra or {}),
    }
    for name, df in tables.items():
        with store.atomic_path(out / f"{name}.csv") as tmp:
            write_csv(df, tmp)
    return tables

"""Accuracy per subset, per question type and answer type, Table A.2's question type x
perturbation, and the blank control's image reliance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.corruptions.controls import CONTROL
from vqarobust.perturbations import OWN_TABLES

# The "model" of the mean over models in question_type_perturbation (no model name can
# start with a parenthesis: the config schema's pattern).
ALL_MODELS = "(mean)"
NOT_PERTURBATIONS = OWN_TABLES
# A model whose accuracy without the image (blank control) reaches this share of its clean
# accuracy uses the image little; the report says so next to its robustness numbers.
IMAGE_RELIANCE_RATIO = 0.8


@dataclass(frozen=True)
class Settings:
    """The controls among the perturbations (class ``control``: the blank images)."""

    controls: Sequence[str]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(controls_of(options.families))


def controls_of(families: dict[str, str] | object) -> list[str]:
    """The perturbations of class ``control``, sorted."""
    return sorted(c for c, f in dict(families or {}).items() if f == CONTROL)  # type: ignore[arg-type]


def image_reliance(accuracy: pl.DataFrame, controls: Sequence[str]) -> pl.DataFrame:
    """Per model and control: clean accuracy, accuracy on the control (without the
    image), their ratio and whether the model ``uses_image_little`` (ratio at least
    ``IMAGE_RELIANCE_RATIO``)."""
    clean = accuracy.filter(pl.col("severity") == 0).select(
        "model", pl.col("accuracy").alias("clean_accuracy")
    )
    blank = accuracy.filter(pl.col("perturbation").is_in(list(controls))).select(
        "model",
        pl.col("perturbation").alias("control"),
        pl.col("accuracy").alias("control_accuracy"),
    )
    ratio = pl.when(pl.col("clean_accuracy") > 0).then(
        pl.col("control_accuracy") / pl.col("clean_accuracy")
    )
    return (
        clean.join(blank, on="model")
        .with_columns(ratio.alias("ratio"))
        .with_columns(
            (pl.col("ratio") >= IMAGE_RELIANCE_RATIO).fill_null(False).alias("uses_image_little")
        )
        .sort("model", "control")
    )


def perturbation_accuracy(accuracy: pl.DataFrame) -> pl.DataFrame:
    """The accuracy rows of the clean subset and the perturbations (no swaps, no chain)."""
    return accuracy.filter(~pl.col("modality").is_in(NOT_PERTURBATIONS))


_QUESTION_TYPE_PERTURBATION = f"""
    WITH per AS (
        SELECT model, modality, perturbation, question_type, CAST(sum(n) AS BIGINT) AS n,
               sum(accuracy * n) / sum(n) AS accuracy
        FROM question_type_accuracy
        WHERE modality NOT IN {NOT_PERTURBATIONS}
          AND (severity > 0 OR modality = 'clean')
        GROUP BY ALL)
    SELECT * FROM per
    UNION ALL
    SELECT '{ALL_MODELS}' AS model, modality, perturbation, question_type,
           max(n) AS n, avg(accuracy) AS accuracy
    FROM per GROUP BY ALL
    ORDER BY ALL"""


def run(inputs: Inputs, settings: Settings) -> Result:
    """Accuracy tables from the scored predictions (DuckDB: the SQL is the definition)."""
    with duckdb.connect() as con:
        con.register("predictions", inputs.table("predictions").to_arrow())
        con.register("questions", inputs.table("_questions").to_arrow())
        accuracy = con.sql(
            """SELECT model, modality, perturbation, severity, count(*) AS n,
                      avg(score) AS accuracy, count(*) FILTER (truncated) AS truncated
               FROM predictions GROUP BY ALL ORDER BY ALL"""
        ).pl()
        tables = {"accuracy": Table(accuracy)}
        for kind in ("question_type", "answer_type"):
            tables[f"{kind}_accuracy"] = Table(con.sql(
                f"""SELECT p.model, p.modality, p.perturbation, p.severity, q.{kind},
                           count(*) AS n, avg(p.score) AS accuracy
                    FROM predictions p JOIN questions q USING (question_id)
                    GROUP BY ALL ORDER BY ALL"""
            ).pl())  # fmt: skip
        con.register("question_type_accuracy", tables["question_type_accuracy"].frame.to_arrow())
        tables["question_type_perturbation"] = Table(con.sql(_QUESTION_TYPE_PERTURBATION).pl())
    reliance = image_reliance(perturbation_accuracy(accuracy), settings.controls)
    tables["image_reliance"] = Table(reliance)
    return Result(tables=tables)


ANALYSIS = Analysis(
    name="accuracy",
    doc=__doc__,
    tables={
        "accuracy": "mean score per model x subset (modality, perturbation, severity)",
        "question_type_accuracy": "the same per question type",
        "answer_type_accuracy": "the same per answer type",
        "question_type_perturbation": "question type x perturbation, severities pooled",
        "image_reliance": "clean vs blank-control accuracy per model",
    },
    settings_type=Settings,
    run=run,
    requires=("scoring",),
)

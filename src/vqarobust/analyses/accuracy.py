"""Accuracy per subset, per question type and answer type, Table A.2's question type x
perturbation, and the blank control's image reliance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.corruptions.controls import CONTROL
from vqarobust.metrics.accuracy import accuracy_tables
from vqarobust.metrics.image_reliance import image_reliance
from vqarobust.perturbations import OWN_TABLES

# The "model" of the mean over models in question_type_perturbation (no model name can
# start with a parenthesis: the config schema's pattern).
ALL_MODELS = "(mean)"
NOT_PERTURBATIONS = OWN_TABLES


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
    """Accuracy tables from the scored predictions, by the accuracy kernel
    (:mod:`vqarobust.metrics.accuracy`, the one the bootstrap calls); Table A.2's pooling
    in DuckDB (the SQL is the definition)."""
    computed = accuracy_tables(inputs.table("predictions"), inputs.table("_questions"))
    tables = {name: Table(frame) for name, frame in computed.items()}
    accuracy = tables["accuracy"].frame
    with duckdb.connect() as con:
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

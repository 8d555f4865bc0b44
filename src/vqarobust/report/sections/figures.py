"""The "Figures" section: the image side at a glance (relative drop, average error, error
vs severity, the scaled sub-metrics, VRE under other weightings) and accuracy per answer
type, question type and question type x corruption."""

from __future__ import annotations

from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.analyses.accuracy import ALL_MODELS
from vqarobust.metrics.robustness import SUBMETRICS
from vqarobust.report import figures as fig
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import table_names

# The question-type figure and heatmap show the most frequent types.
TOP_QUESTION_TYPES = 15
# A question type is named weakest for a corruption only with this many questions.
MIN_TYPE_QUESTIONS = 20


def _type_grid(con: duckdb.DuckDBPyConnection, top: int) -> pl.DataFrame:
    """The ``top`` most frequent question types x image corruptions, mean accuracy over
    the models, as (model = question type, perturbation, accuracy) for the heatmap."""
    if "question_type_perturbation" not in table_names(con):  # written before it existed
        return pl.DataFrame(
            schema={"model": pl.String, "perturbation": pl.String, "accuracy": pl.Float64}
        )
    return con.sql(
        f"""SELECT q.question_type AS model, q.perturbation, q.accuracy
            FROM question_type_perturbation q
            JOIN (SELECT question_type FROM questions GROUP BY ALL
                  ORDER BY count(*) DESC, question_type LIMIT {int(top)}) t USING (question_type)
            WHERE q.model = '{ALL_MODELS}' AND q.modality = 'image'
              AND q.perturbation IN (
                  SELECT perturbation FROM vre_perturbation WHERE modality = 'image')"""
    ).pl()


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """Accuracy per corruption and severity with intervals, the cells whose drop is not
    significant, the sub-metrics, the weighting sweep and accuracy per type."""
    del run
    image = "modality IN ('clean', 'image')"
    return {
        "accuracy": con.sql(
            """SELECT a.*, i.low, i.high FROM image_accuracy a
               LEFT JOIN intervals i ON i.metric = 'accuracy' AND i.model = a.model
                 AND i.perturbation = a.perturbation AND i.severity = a.severity
                 AND i.modality IN ('clean', 'image')
               ORDER BY ALL"""
        ).pl(),
        "not_significant": set(
            con.execute(
                "SELECT model, perturbation FROM drop_tests WHERE modality = 'image' "
                "GROUP BY ALL HAVING NOT bool_or(significant)"
            ).fetchall()
        ),
        "sub": con.sql(
            "SELECT * EXCLUDE (modality) "
            "FROM submetrics WHERE modality = 'image' ORDER BY model, perturbation"
        ).pl(),
        "sweep": con.sql(
            "SELECT * EXCLUDE (modality) FROM vre_sweep WHERE modality = 'image'"
        ).pl(),
        "atype_long": con.sql(
            "SELECT model, perturbation, severity, answer_type, n, accuracy "
            f"FROM answer_type_accuracy WHERE {image}"
        ).pl(),
        "qtype_long": con.sql(
            "SELECT model, perturbation, severity, question_type, n, accuracy "
            f"FROM question_type_accuracy WHERE {image}"
        ).pl(),
        "type_grid": _type_grid(con, TOP_QUESTION_TYPES),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """``accuracy.csv`` and ``submetrics.csv``."""
    return {"accuracy": data["accuracy"], "submetrics": data["sub"]}


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """The image side's figures (placeholders in a run without image perturbations, such
    as GQA read without images) and the per-type accuracy figures."""
    sub, families, grid = data["sub"], run.families, data["type_grid"]
    labels = {m: SUBMETRICS.get(m).label for m in SUBMETRICS}
    image_side = not sub.is_empty()

    def no_images() -> Any:
        return None if image_side else fig.placeholder("No image perturbations in this run.")

    return {
        "relative_drop": no_images()
        or fig.heatmap(
            sub,
            "relative_drop",
            "Severity-aggregated relative drop A_rel",
            families,
            not_significant=data["not_significant"],
        ),
        "average_error": no_images()
        or fig.heatmap(sub, "average_error", "Average error", families, "Blues"),
        "error_vs_severity": no_images() or fig.error_vs_severity(data["accuracy"], families),
        "radar": no_images() or fig.radars(sub, labels),
        "vre_sweep": no_images() or fig.vre_sweep(data["sweep"]),
        "answer_type_accuracy": fig.type_accuracy(data["atype_long"], "answer_type", families),
        "question_type_accuracy": fig.type_accuracy(
            data["qtype_long"], "question_type", families, top=TOP_QUESTION_TYPES
        ),
        "question_type_perturbation": fig.heatmap(
            grid,
            "accuracy",
            "Accuracy per question type x corruption (mean over models, severities 1-5)",
            families,
            "Blues",
        )
        if grid.height
        else fig.placeholder("No question_type_perturbation table in this database."),
    }


def weakest_types_sentence(weakest: pl.DataFrame | None, min_questions: int) -> str | None:
    """The weakest question type per image corruption: ``weakest`` holds (perturbation,
    question_type, accuracy), the type of lowest mean accuracy over the models in table
    ``question_type_perturbation`` among types with ``min_questions`` questions or more."""
    if weakest is None or not weakest.height:
        return None
    items = "; ".join(f"{c}: {t} ({a:.3f})" for c, t, a in weakest.iter_rows())
    return (
        "Weakest question type per corruption (mean accuracy over the models, severities "
        f"1-5, point estimates; types with {min_questions} questions or more): {items}."
    )


def context(data: Data, run: Run) -> dict[str, Any]:
    """Whether the question type x corruption heatmap has data."""
    del run
    return {"question_type_grid": data["type_grid"].height > 0}


def weakest_types(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per image corruption of the VRE tables, the question type with the lowest mean
    accuracy over the models (ties: the first type alphabetically)."""
    if "question_type_perturbation" not in table_names(con):
        return None
    return con.sql(
        f"""SELECT perturbation, question_type, accuracy FROM (
                SELECT q.perturbation, q.question_type, q.accuracy,
                       row_number() OVER (PARTITION BY q.perturbation
                                          ORDER BY q.accuracy, q.question_type) AS k
                FROM question_type_perturbation q
                WHERE q.model = '{ALL_MODELS}' AND q.modality = 'image'
                  AND q.perturbation IN (
                      SELECT perturbation FROM vre_perturbation WHERE modality = 'image')
                  AND q.question_type IN (
                      SELECT question_type FROM questions GROUP BY ALL
                      HAVING count(*) >= {MIN_TYPE_QUESTIONS}))
            WHERE k = 1 ORDER BY perturbation"""
    ).pl()


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """The weakest question type per image corruption."""
    return {"weakest_types": weakest_types(con)}


SECTION = Section(
    "figures", ("accuracy", "robustness", "uncertainty"), context, read, figures, tables, summary
)

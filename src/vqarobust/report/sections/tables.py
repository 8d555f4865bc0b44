"""The "Tables" section: the model cards, the VRE, MMI and R_score tables, and accuracy
per question and answer type."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from vqarobust.models.checkpoints import reference_sentence
from vqarobust.provenance import PREFIX
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import interval_columns, table_names


def _model_cards(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The model_cards table with VRE and its interval as one text column."""
    if "model_cards" not in table_names(con):
        return pl.DataFrame()
    cards = con.sql("SELECT * FROM model_cards ORDER BY model").pl()
    return interval_columns(cards).with_columns(
        pl.col("parameters").map_elements(lambda n: f"{n:,}", return_dtype=pl.String)
    )


def _clean_vs_perturbed(con: duckdb.DuckDBPyConnection, kind: str) -> pl.DataFrame:
    """Per model and ``kind`` (question_type or answer_type): clean accuracy and the mean
    over every corrupted image subset, from the ``{kind}_accuracy`` table."""
    return con.sql(
        f"""SELECT model, {kind},
                   avg(accuracy) FILTER (WHERE severity = 0) AS clean,
                   avg(accuracy) FILTER (WHERE severity > 0) AS perturbed,
                   max(n) FILTER (WHERE severity = 0) AS n
            FROM {kind}_accuracy WHERE modality IN ('clean', 'image')
            GROUP BY ALL ORDER BY model, {kind}"""
    ).pl()


def reference_notes(info: dict[str, str]) -> list[str]:
    """A sentence per model that ran a shipped reference checkpoint (its manifest's recipe,
    trainer and accuracy, from ``provenance.model.<name>``)."""
    out = []
    for key, value in sorted(info.items()):
        if key.startswith(PREFIX + "model."):
            reference = json.loads(value).get("reference")
            if reference:
                out.append(reference_sentence(key.removeprefix(PREFIX + "model."), reference))
    return out


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """The image side's summary tables, and the notes on reference checkpoints."""
    return {
        "references": reference_notes(run.info),
        "cards": _model_cards(con),
        "vre_model": con.sql(
            "SELECT * EXCLUDE (modality) FROM vre_model WHERE modality = 'image' ORDER BY vre"
        ).pl(),
        "vre_corruption": con.sql(
            "SELECT perturbation AS corruption, * EXCLUDE (modality, perturbation) "
            "FROM vre_corruption WHERE modality = 'image' ORDER BY vre DESC"
        ).pl(),
        "mmi": con.sql(
            "PIVOT (SELECT model, \"group\", mmi FROM mmi WHERE modality = 'image' "
            "AND scope IN ('all', 'family')) ON \"group\" USING first(mmi) ORDER BY model"
        ).pl(),
        "rscore": con.sql(
            "PIVOT (SELECT model, severity, rscore FROM rscore WHERE modality = 'image' "
            "AND perturbation = 'all') ON severity USING first(rscore) ORDER BY model"
        ).pl(),
        "question_type": _clean_vs_perturbed(con, "question_type"),
        "answer_type": _clean_vs_perturbed(con, "answer_type"),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """The VRE, MMI and R_score tables and accuracy per question and answer type."""
    return {"vre_model": data["vre_model"], "vre_corruption": data["vre_corruption"],
            "mmi": data["mmi"], "rscore": data["rscore"],
            "question_type_accuracy": data["question_type"],
            "answer_type_accuracy": data["answer_type"]}  # fmt: skip


def context(data: Data, run: Run) -> dict[str, Any]:
    """Every table the section shows, by the name the partial uses."""
    del run
    return dict(data)


SECTION = Section("tables", ("model_cards", "robustness", "accuracy"), context, read,
                  tables=tables)  # fmt: skip

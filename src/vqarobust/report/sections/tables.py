"""The "Tables" section: the model cards, the VRE, MMI and R_score tables (VRE per
perturbation family too, with the family that costs each model most), and accuracy per
question and answer type."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl

from vqarobust.models.checkpoints import reference_sentence
from vqarobust.provenance import PREFIX
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import interval_columns, table_names, with_interval


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


def _vre_family(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The image side's ``vre_family`` rows with the intervals of their relative drop and
    VRE (NULL bounds without resamples); empty for a database written before it."""
    if "vre_family" not in table_names(con):
        return pl.DataFrame()
    return con.sql(
        """SELECT f.model, f.family, f.n_perturbations, f.accuracy,
                  f.relative_drop, r.low AS relative_drop_low, r.high AS relative_drop_high,
                  f.vre, v.low AS vre_low, v.high AS vre_high
           FROM vre_family f
           LEFT JOIN intervals r ON r.metric = 'relative_drop_family' AND r.model = f.model
                AND r.modality = f.modality AND r.perturbation = f.family
           LEFT JOIN intervals v ON v.metric = 'vre_family' AND v.model = f.model
                AND v.modality = f.modality AND v.perturbation = f.family
           WHERE f.modality = 'image' ORDER BY f.model, f.relative_drop DESC, f.family"""
    ).pl()


def family_sentences(families: pl.DataFrame) -> list[str]:
    """Per model (of two families or more): the family with the largest relative drop,
    and whether its interval lies above every other family's (else how many it overlaps);
    ``families`` as :func:`_vre_family` gives it."""
    out = []
    for (model,), rows in families.sort("model").group_by("model", maintain_order=True):
        if rows.height < 2:
            continue
        rows = rows.sort("relative_drop", "family", descending=[True, False])
        top, rest = rows.row(0, named=True), rows.slice(1)
        drop = with_interval(
            top["relative_drop"], top["relative_drop_low"], top["relative_drop_high"]
        )
        text = f"{model}: the {top['family']} perturbations cost the most (relative drop {drop}"
        if top["relative_drop_low"] is None or rest["relative_drop_high"].null_count():
            out.append(text + "; no intervals in this run).")
            continue
        overlapping = int((rest["relative_drop_high"] >= top["relative_drop_low"]).sum())
        if overlapping:
            text += (
                f"), but its interval overlaps {overlapping} of the other "
                f"{rest.height} families' intervals."
            )
        else:
            text += f"), its interval above every other family's ({rest.height})."
        out.append(text)
    return out


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
        "vre_perturbation": con.sql(
            "SELECT * EXCLUDE (modality) "
            "FROM vre_perturbation WHERE modality = 'image' ORDER BY vre DESC"
        ).pl(),
        "vre_family": _vre_family(con),
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
    return {
        "vre_model": data["vre_model"],
        "vre_perturbation": data["vre_perturbation"],
        "vre_family": data["vre_family"],
        "mmi": data["mmi"],
        "rscore": data["rscore"],
        "question_type_accuracy": data["question_type"],
        "answer_type_accuracy": data["answer_type"],
    }


def context(data: Data, run: Run) -> dict[str, Any]:
    """Every table the section shows, by the name the partial uses."""
    del run
    families = data["vre_family"]
    return {
        **data,
        "family_sentences": family_sentences(families) if families.height else [],
        "vre_family_shown": interval_columns(families) if families.height else families,
    }


SECTION = Section("tables", ("model_cards", "robustness", "accuracy"), context, read, tables=tables)

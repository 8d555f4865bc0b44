"""The "Uncertainty and significance" section: VRE intervals and rank stability, the
differences between models, the paired drop tests and effective robustness."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.metrics.uncertainty import (
    ADJUSTMENT_NAMES,
    MIN_FIT_POINTS,
    MIN_MODELS_FOR_FIT,
    family_note,
)
from vqarobust.report import figures as fig
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import Summary

# The CSV files this section writes, each the table of the same name.
TABLES = ("intervals", "model_comparisons", "rank_stability", "drop_tests", "effective_robustness")
# Cells whose drop is not significant shown on the page (the CSV holds all).
N_WEAK_SHOWN = 60


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """Intervals, comparisons, rank shares, drop tests and effective robustness."""
    del run
    return {
        "intervals": con.sql("SELECT * FROM intervals").pl(),
        "model_comparisons": con.sql("SELECT * FROM model_comparisons ORDER BY ALL").pl(),
        "rank_stability": con.sql("SELECT * FROM rank_stability ORDER BY ALL").pl(),
        "drop_tests": con.sql("SELECT * FROM drop_tests ORDER BY ALL").pl(),
        "effective_robustness": con.sql(
            "SELECT * FROM effective_robustness ORDER BY modality, perturbation, model"
        ).pl(),
        "vre_bounds": con.sql(
            """SELECT v.model, v.vre, i.low, i.high FROM vre_model v
               LEFT JOIN intervals i ON i.metric = 'vre_model' AND i.model = v.model
                 AND i.modality = v.modality
               WHERE v.modality = 'image'"""
        ).pl(),
        "models": con.sql("SELECT DISTINCT model FROM predictions ORDER BY model").pl(),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """The five tables of :data:`TABLES`, as stored."""
    return {name: data[name] for name in TABLES}


def interval_note(s: Summary) -> str:
    """What the brackets of every table are (or that there are none)."""
    if not s.resamples:
        return "No intervals: the run had uncertainty.resamples: 0."
    unit = "images" if s.cluster == "image" else "questions"
    return (
        f"Brackets: {s.level:.0%} percentile intervals over {s.resamples:,} bootstrap "
        f"resamples of the {unit} (the same resamples for every model and subset, so "
        "differences are paired); rank shares: how often the model holds its rank."
    )


def no_fit_reason(n_models: int) -> str:
    """Why there is no effective robustness with ``n_models`` models."""
    return (
        f"No effective robustness: each model's expected accuracy comes from a line fitted "
        f"on the other models, which needs at least {MIN_MODELS_FOR_FIT} models (or an "
        f"uncertainty.effective_reference of {MIN_FIT_POINTS}); this run has {n_models}."
    )


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """VRE with intervals and rank shares; the effective-robustness fit."""
    ranks = data["rank_stability"].filter(pl.col("modality") == "image")
    fit = data["effective_robustness"].filter(
        pl.col("perturbation") == "all", pl.col("predicted").is_not_null().any().over("modality")
    )
    n_models = data["models"].height
    return {
        "vre_intervals": fig.vre_intervals(data["vre_bounds"], ranks, run.summary.level)
        if data["vre_bounds"].height
        else fig.placeholder("No VRE in this run."),
        "effective_robustness": fig.effective_robustness(fit)
        if fit.height
        else fig.placeholder(no_fit_reason(n_models)),
    }


def comparison_sentences(
    models: pl.DataFrame, comparisons: pl.DataFrame | None, level: float
) -> list[str]:
    """For every pair of ``models`` (model, vre: table ``vre_model`` of the image side), "X
    is more robust than Y" when their VRE difference is ``distinguishable`` (``comparisons``:
    table ``model_comparisons``, image side, metric vre: the adjusted p-value of the family
    of these comparisons below ``1 - level``), else "X and Y are indistinguishable at 95%",
    each with its interval and :func:`family_note`; without resamples, that no comparison
    was made."""
    if models.height < 2:
        return []
    if comparisons is None or comparisons.is_empty():
        return [
            "No interval was computed (uncertainty.resamples: 0), so no model is called "
            "more robust than another."
        ]
    vre = dict(models.select("model", "vre").iter_rows())
    out = []
    for c in comparisons.sort("model_a", "model_b").iter_rows(named=True):
        a, b = c["model_a"], c["model_b"]
        note = family_note(c, "image-side VRE")
        if c["distinguishable"]:
            better, worse = (a, b) if c["difference"] < 0 else (b, a)
            d, lo, hi = (
                (c["difference"], c["low"], c["high"])
                if better == a
                else (-c["difference"], -c["high"], -c["low"])
            )
            out.append(
                f"{better} is more robust than {worse} (VRE {vre[better]:.3f} vs "
                f"{vre[worse]:.3f}, difference {d:.3f} [{lo:.3f}, {hi:.3f}]; {note})."
            )
        else:
            out.append(
                f"{a} and {b} are indistinguishable at {level:.0%} (VRE difference "
                f"{c['difference']:.3f} [{c['low']:.3f}, {c['high']:.3f}]; {note})."
            )
    return out


def _tests(tests: pl.DataFrame) -> dict[str, Any] | None:
    """The drop tests' counts per modality and test, and the cells not significant."""
    if not tests.height:
        return None
    counts = (
        tests.group_by("modality", "test")
        .agg(
            pl.len().alias("cells"),
            pl.col("significant").sum().alias("significant drops"),
            (~pl.col("significant")).sum().alias("not significant"),
        )
        .sort("modality", "test")
    )
    weak = tests.filter(~pl.col("significant")).select(
        "model",
        "modality",
        "perturbation",
        "severity",
        "n_worse",
        "n_better",
        "mean_difference",
        "p_value",
        "p_adjusted",
    )
    adjust = ADJUSTMENT_NAMES.get(tests["adjust"][0], "")
    return {
        "counts": counts,
        "weak": weak.head(N_WEAK_SHOWN),
        "n_weak": weak.height,
        "adjust": adjust,
        "n_cells": tests.height,
    }


def context(data: Data, run: Run) -> dict[str, Any]:
    """Model differences, rank shares, the drop tests' counts and non-significant cells,
    effective robustness, and what the brackets are."""
    comparisons = data["model_comparisons"]
    ranks = data["rank_stability"]
    eff = data["effective_robustness"].filter(pl.col("perturbation") == "all")
    if eff.height and eff["predicted"].is_null().all():
        eff = eff.clear()  # no model has a fit: the reason stands alone, no table of notes
    return {
        "interval_note": interval_note(run.summary),
        "level": run.summary.level,
        "comparisons": comparisons.select(
            "modality",
            "metric",
            "model_a",
            "model_b",
            pl.col("difference").alias("difference a - b"),
            "low",
            "high",
            "se",
            "p_value",
            "p_adjusted",
            "family_size",
            "distinguishable",
        )
        if comparisons.height
        else None,
        "ranks": ranks.with_columns(pl.format("rank {}", "rank").alias("rank")).pivot(
            on="rank", index=["modality", "model"], values="share"
        )
        if ranks.height
        else None,
        "effective": eff.drop("perturbation") if eff.height else None,
        "no_fit_reason": no_fit_reason(data["models"].height),
        "tests": _tests(data["drop_tests"]),
    }


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """The intervals' settings (coverage, resampling unit, resamples; from ``run_info``)
    and the model comparisons of image-side VRE."""
    info = con.execute("SELECT value FROM run_info WHERE key = 'uncertainty'").fetchall()
    unc = json.loads(info[0][0]) if info else {}
    comparisons = con.sql(
        "SELECT * FROM model_comparisons WHERE modality = 'image' AND metric = 'vre'"
    ).pl()
    return {
        "comparisons": comparisons,
        "level": float(unc.get("level", 0.95)),
        "cluster": str(unc.get("cluster", "image")),
        "resamples": int(unc.get("resamples", 0)),
    }


SECTION = Section(
    "uncertainty", ("uncertainty", "robustness"), context, read, figures, tables, summary
)

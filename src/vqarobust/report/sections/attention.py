"""The "Attention shift" section: how far each model's attention over the image moves
from its clean map under each corruption and severity (Jensen-Shannon divergence)."""

from __future__ import annotations

from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.report import figures as fig
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import table_names


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """``attention_shift`` (empty when the database has none)."""
    del run
    if "attention_shift" not in table_names(con):
        return {"shift": pl.DataFrame()}
    return {"shift": con.sql("SELECT * FROM attention_shift ORDER BY ALL").pl()}


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """``attention_shift.csv``."""
    return {"attention_shift": data["shift"]}


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """The mean divergence per model, corruption and severity."""
    shift = data["shift"]
    return {
        "attention_shift": fig.attention_shift(shift, run.families)
        if shift.height
        else fig.placeholder("No attention maps in this database.")
    }


def context(data: Data, run: Run) -> dict[str, Any] | None:
    """The sample size and the mean divergence [its interval over the images] per model x
    corruption with one column per severity; None without attention maps."""
    del run
    shift = data["shift"]
    if shift.is_empty():
        return None
    cell = (
        pl.when(pl.col("js_low").is_null())
        .then(pl.format("{}", pl.col("js_mean").round(3)))
        .otherwise(
            pl.format(
                "{} [{}, {}]", *(pl.col(c).round(3) for c in ("js_mean", "js_low", "js_high"))
            )
        )
    )
    wide = (
        shift.with_columns(pl.col("severity").cast(pl.String), cell.alias("js"))
        .pivot("severity", index=["model", "perturbation"], values="js")
        .sort("model", "perturbation")
    )
    return {"n": int(shift["n_questions"].max()), "wide": wide}


SECTION = Section("attention", ("attention",), context, read, figures, tables)

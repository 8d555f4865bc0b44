"""The "What this study cost" section: each model's inference costs summed from table
``costs`` (wall, CPU and GPU hours, peak GPU memory, requests, retries, tokens, money),
and sentences of totals, each a sum of that table's rows (:func:`cost_sentences`)."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from vqarobust.costs import COSTS_SCHEMA, LOADS_SCHEMA, load_total
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import table_names

_INTS = ("requests", "retries", "prompt_tokens", "completion_tokens")


def _known_sum(column: str) -> pl.Expr:
    """The sum of the known values of ``column``; null where none is known (polars sums
    an all-null column to 0, which would claim a cost of nothing)."""
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum())


def _totals(costs: pl.LazyFrame | pl.DataFrame, by: list[str]) -> pl.DataFrame:
    exprs = [
        pl.len().alias("cells"),
        (~pl.col("known")).sum().cast(pl.Int64).alias("unknown_cells"),
        pl.col("questions").sum().alias("questions"),
        pl.col("device").drop_nulls().unique().sort().str.join(", ").alias("devices"),
        (_known_sum("wall_s") / 3600).alias("wall_hours"),
        (_known_sum("cpu_s") / 3600).alias("cpu_hours"),
        (_known_sum("gpu_s") / 3600).alias("gpu_hours"),
        (pl.col("peak_gpu_bytes").max() / 1e9).alias("peak_gpu_gb"),
        *[_known_sum(c).alias(c) for c in _INTS],
        _known_sum("money").alias("money"),
    ]
    frame = costs.lazy()
    grouped = frame.group_by(by).agg(exprs).sort(by) if by else frame.select(exprs)
    return grouped.collect()


def model_costs(costs: pl.DataFrame) -> pl.DataFrame:
    """Per model: cells, cells of unknown cost, questions answered, the devices, hours,
    the highest peak GPU memory (GB), requests, retries, tokens and money (sums over the
    cells whose value is known)."""
    return _totals(costs, ["model"])


def cost_totals(costs: pl.DataFrame) -> dict[str, Any]:
    """The same sums over every cell of the table."""
    return _totals(costs, []).row(0, named=True)


def _g(x: float) -> str:
    """Three significant digits, or the whole number from 1000 on (no exponent)."""
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def _n(count: int, noun: str, plural: str | None = None) -> str:
    """``1 cell``, ``2 cells``."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


# The money columns summed in the money sentence, and what each prices.
PARTS = (("GPU time", "gpu_money"), ("CPU time", "cpu_money"), ("tokens", "token_money"))


def _money_sentence(costs: pl.DataFrame, total: dict[str, Any]) -> str:
    currency = next(iter(costs["currency"].drop_nulls()), None)
    if currency is None:
        return "No prices are set (prices: in the config), so no money is shown."
    if total["money"] is None:
        return (
            f"No cell has a price that applies to what it used (prices: in {currency}), so "
            "no money is shown."
        )
    sums = {what: costs[column].drop_nulls() for what, column in PARTS}
    parts = [f"{_g(v.sum())} for {what}" for what, v in sums.items() if len(v)]
    unpriced = costs.filter(pl.col("known") & pl.col("money").is_null()).height
    rest = (
        f"; {_n(unpriced, 'cell')} of known cost with no price that applies count nothing"
        if unpriced
        else ""
    )
    return (
        f"At the config's prices the priced cells cost {_g(total['money'])} {currency} "
        f"({', '.join(parts)}){rest}."
    )


def cost_sentences(costs: pl.DataFrame, loads: pl.DataFrame) -> list[str]:
    """The section's sentences: what was answered and how many cells' costs are unknown,
    the hours, a served model's requests and tokens, the money, the load times. Every
    number is a sum of ``costs`` (or of ``loads``) rows."""
    total = cost_totals(costs)
    models = costs["model"].n_unique()
    out = [
        f"Inference answered {_n(total['questions'], 'question')} in "
        f"{_n(total['cells'], 'model x subset cell')} of {_n(models, 'model')}."
    ]
    if total["unknown_cells"]:
        out[-1] += (
            f" The costs of {_n(total['unknown_cells'], 'cell')} are unknown (their "
            "predictions were written before costs were recorded) and are left out "
            "of every sum below."
        )
    if total["wall_hours"] is not None:
        gpu_cells = costs.filter(pl.col("gpu_s").is_not_null()).height
        gpu = (
            f", and {_g(total['gpu_hours'])} GPU-hours on the {_n(gpu_cells, 'cell')} "
            "computed on a GPU"
            if gpu_cells
            else "; no cell was computed on a GPU"
        )
        out.append(
            f"The cells of known cost took {_g(total['wall_hours'])} hours of wall-clock "
            f"time and {_g(total['cpu_hours'] or 0.0)} CPU-hours{gpu}."
        )
    if total["requests"] is not None:
        prompt, completion = total["prompt_tokens"] or 0, total["completion_tokens"] or 0
        out.append(
            f"Served models made {_n(total['requests'], 'request')} "
            f"({_n(total['retries'] or 0, 'retry', 'retries')}) and used {prompt} prompt and "
            f"{completion} completion tokens."
        )
    if total["wall_hours"] is not None:
        out.append(_money_sentence(costs, total))
    seconds, n = load_total(loads)
    if n:
        out.append(
            f"Loading the models took {_g(seconds)} s over {_n(n, 'load')}, not in the sums above."
        )
    return out


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """Tables ``costs`` and ``model_loads`` (empty where the results file predates them)."""
    del run
    names = table_names(con)
    costs = (
        con.sql("SELECT * FROM costs ORDER BY model, modality, perturbation, severity").pl()
        if "costs" in names
        else pl.DataFrame(schema=COSTS_SCHEMA)
    )
    loads = (
        con.sql("SELECT * FROM model_loads ORDER BY ALL").pl()
        if "model_loads" in names
        else pl.DataFrame(schema=LOADS_SCHEMA)
    )
    return {"costs": costs, "loads": loads}


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """``costs.csv`` (per model x subset) and ``model_costs.csv`` (per model)."""
    return {"costs": data["costs"], "model_costs": model_costs(data["costs"])}


def context(data: Data, run: Run) -> dict[str, Any] | None:
    """The per-model table and the sentences; None (left out) without costs."""
    del run
    costs = data["costs"]
    if costs.is_empty():
        return None
    return {"models": model_costs(costs), "sentences": cost_sentences(costs, data["loads"])}


SECTION = Section("costs", ("costs",), context, read, tables=tables)

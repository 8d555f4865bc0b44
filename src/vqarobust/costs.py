"""What each cell cost: the per-subset costs inference records in every predictions file's
metadata, gathered into one table per model x subset, priced where the config gives
prices (docs/workflow.md, table ``costs``).

A predictions file's metadata record (key :data:`vqarobust.store.INPUTS_KEY`, written by
:func:`vqarobust.inference.run_model_job`) holds ``costs``: one entry per (modality,
perturbation, severity) subset of the file, the sums over the subset's chunks of what
each chunk cost when it was computed (a reused chunk keeps its original cost), and
``load_s``, the model's load time in that job (None when nothing was loaded). A file
written before costs were recorded has no ``costs``: its subsets' costs are unknown
(null, ``known`` false), never zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from vqarobust import store

# The measures of a costs entry that are summed, and their types in the table.
MEASURES: dict[str, type[pl.DataType]] = {
    "wall_s": pl.Float64,
    "cpu_s": pl.Float64,
    "gpu_s": pl.Float64,
    "peak_gpu_bytes": pl.Int64,
    "requests": pl.Int64,
    "retries": pl.Int64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
}
MONEY = ("gpu_money", "cpu_money", "token_money", "money")
# Tables of measured times: two runs of one study never hold the same rows in them, so
# comparisons of results (provenance.diff, benchmarks/compare_duckdb.py) leave them out.
MEASURED_TABLES = frozenset({"costs", "model_loads"})
COSTS_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.String,
    "modality": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int16,
    "device": pl.String,
    "known": pl.Boolean,
    "questions": pl.Int64,
    **MEASURES,
    "currency": pl.String,
    **dict.fromkeys(MONEY, pl.Float64),
}
LOADS_SCHEMA: dict[str, type[pl.DataType]] = {
    "model": pl.String,
    "file": pl.String,
    "known": pl.Boolean,
    "load_s": pl.Float64,
}
_SUBSET = ("modality", "perturbation", "severity")


@dataclass(frozen=True)
class FileCosts:
    """One predictions file's cost rows (``COSTS_SCHEMA`` less the money) and its load
    row; ``known`` is False for a file without a ``costs`` record."""

    rows: list[dict[str, Any]]
    load: dict[str, Any]
    known: bool


def _record(path: str) -> dict[str, Any]:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(store.INPUTS_KEY)
    return json.loads(raw) if raw else {}


def _subset_counts(path: str) -> pl.DataFrame:
    """Each (model, modality, perturbation, severity) of a file and its row count."""
    columns = ["model", *_SUBSET]
    frame = pl.from_arrow(pq.read_table(path, columns=columns))
    return frame.group_by(columns).len("questions").sort(columns)


def _entry_row(model: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    row = {
        "model": model,
        **{k: entry[k] for k in _SUBSET},
        "device": entry.get("device"),
        "known": True,
        "questions": int(entry["questions"]),
    }
    for name, dtype in MEASURES.items():
        value = entry.get(name)
        row[name] = None if value is None else (float if dtype == pl.Float64 else int)(value)
    return row


def read_file_costs(path: str | Path) -> FileCosts:
    """The cost rows of one predictions file, from its metadata (module doc): one row per
    subset the file holds; a subset its record has no entry for is unknown."""
    path = str(path)
    record = _record(path)
    counts = _subset_counts(path)
    model = (record.get("inputs") or {}).get("model")
    if model is None and counts.height:
        model = counts["model"][0]
    entries = record.get("costs")
    known = {tuple(e[k] for k in _SUBSET): e for e in entries or []}
    rows = []
    for r in counts.iter_rows(named=True):
        entry = known.get(tuple(r[k] for k in _SUBSET))
        if entry is None:
            rows.append({**r, "device": None, "known": False, **dict.fromkeys(MEASURES)})
        else:
            rows.append(_entry_row(r["model"], entry))
    load = record.get("load_s") if entries is not None else None
    file_known = entries is not None
    return FileCosts(
        rows,
        {
            "model": model,
            "file": Path(path).stem,
            "known": file_known,
            "load_s": None if load is None else float(load),
        },
        file_known,
    )


def cost_rows(paths: Sequence[str | Path]) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """The unpriced costs table (``COSTS_SCHEMA`` without money values), the load table
    (one row per predictions file) and the files that carry no costs."""
    rows, loads, unknown = [], [], []
    for path in paths:
        got = read_file_costs(path)
        rows += got.rows
        loads.append(got.load)
        if not got.known:
            unknown.append(str(path))
    base = {k: v for k, v in COSTS_SCHEMA.items() if k not in ("currency", *MONEY)}
    costs = pl.DataFrame(rows, schema=base, orient="row") if rows else pl.DataFrame(schema=base)
    keys = ["model", *_SUBSET]
    dup = costs.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise ValueError(
            f"{dup.height} model x subset cells have costs in two files, e.g.\n{dup.head(3)}"
        )
    loads_frame = pl.DataFrame(loads, schema=LOADS_SCHEMA, orient="row")
    return costs.sort(keys), loads_frame.sort("model", "file"), unknown


def _times(measure: str, hourly: float | None) -> pl.Expr:
    if hourly is None:
        return pl.lit(None, pl.Float64)
    return pl.col(measure) / 3600.0 * hourly


def _tokens(prices: Mapping[str, Mapping[str, float]]) -> pl.Expr:
    """Token money of a row whose model has a token price; null for the others."""
    out = pl.lit(None, pl.Float64)
    for model, p in sorted(prices.items()):
        money = (
            pl.col("prompt_tokens") * p["prompt_per_million"]
            + pl.col("completion_tokens") * p["completion_per_million"]
        ) / 1e6
        out = pl.when(pl.col("model") == model).then(money).otherwise(out)
    return out.cast(pl.Float64)


def with_money(frame: pl.DataFrame, prices: Mapping[str, Any] | None) -> pl.DataFrame:
    """``frame`` (columns model, gpu_s, cpu_s, prompt_tokens, completion_tokens) with its
    money: GPU-seconds at ``gpu_hour``, CPU-seconds at ``cpu_hour``, each model's prompt
    and completion tokens at its price per million; ``money`` their sum, and
    ``currency``. A part is null where no price applies to it or what it prices is
    unknown, and ``money`` is null where every part is: no price is ever assumed."""
    prices = prices or {}
    parts = [
        _times("gpu_s", prices.get("gpu_hour")).alias("gpu_money"),
        _times("cpu_s", prices.get("cpu_hour")).alias("cpu_money"),
        _tokens(prices.get("tokens") or {}).alias("token_money"),
    ]
    priced = frame.with_columns(parts)
    names = ["gpu_money", "cpu_money", "token_money"]
    any_part = pl.any_horizontal([pl.col(n).is_not_null() for n in names])
    money = pl.when(any_part).then(pl.sum_horizontal(names)).otherwise(None).alias("money")
    has_prices = (
        prices.get("gpu_hour") is not None
        or prices.get("cpu_hour") is not None
        or bool(prices.get("tokens"))
    )
    currency = prices.get("currency") if has_prices else None
    return priced.with_columns(money, pl.lit(currency, pl.String).alias("currency"))


def price(costs: pl.DataFrame, prices: Mapping[str, Any] | None) -> pl.DataFrame:
    """The costs table with its money columns (:func:`with_money`)."""
    return with_money(costs, prices).select(list(COSTS_SCHEMA))


def load_total(loads: pl.DataFrame) -> tuple[float, int]:
    """Seconds spent loading models and the number of loads. The outputs of one job
    carry that job's one load time each, so a (model, load time) pair counts once."""
    known = loads.filter(pl.col("load_s").is_not_null()).unique(["model", "load_s"])
    return float(known["load_s"].sum()), known.height

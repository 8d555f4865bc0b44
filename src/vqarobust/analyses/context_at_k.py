"""The SwapMix paper's Table 2: context reliance from the swaps of rank <= k, for each k
of ``context.reliance_k`` (docs/context.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics.context_paper import reliance_at_k

KEYS = ["question_id", "perturbation", "severity", "rank"]


@dataclass(frozen=True)
class Settings:
    """``context.reliance_k`` (``context.k`` where it is not set)."""

    ks: Sequence[int]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(sorted(set(int(k) for k in options.reliance_k)))


def _swap_tables(inputs: Inputs) -> dict[str, pl.DataFrame]:
    """The swap table of each kind of input a model reads: ``pixels`` and each source."""
    tables = {}
    with contextlib.suppress(FileNotFoundError):
        tables["pixels"] = inputs.table("context_swaps")
    try:
        feature = inputs.table("feature_swaps")
    except FileNotFoundError:
        return tables
    for (source,), frame in feature.group_by("source"):
        tables[str(source)] = frame
    return tables


def run(inputs: Inputs, settings: Settings) -> Result:
    """Reliance at each k from each context prediction's swap rank."""
    swaps = _swap_tables(inputs)
    # Swap tables written before severities were int16 hold int8: one type for the concat.
    ranks = [
        swaps[r["inputs"]]
        .select(KEYS)
        .with_columns(
            pl.lit(r["model"]).alias("model"),
            pl.col("severity").cast(pl.Int16),
            pl.col("rank").cast(pl.Int8),
        )
        for r in inputs.table("model_inputs").iter_rows(named=True)
        if r["inputs"] in swaps
    ]
    if not ranks:
        return Result()
    table = reliance_at_k(inputs.table("_scored"), pl.concat(ranks), list(settings.ks))
    return Result(tables={"context_reliance_k": Table(table, ordered=True)})


ANALYSIS = Analysis(
    name="context_at_k",
    doc=__doc__,
    tables={"context_reliance_k": "class and attribute reliance at each k, per model"},
    settings_type=Settings,
    run=run,
    requires=("scoring", "context"),
    active=lambda options: bool(options.context) and options.models is not None,
)

"""Attention shift: how far each model's attention over the image moves from the clean
map under each corruption (docs/metrics.md, "Attention shift")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from vqarobust import store
from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics.attention import attention_shift_table, attention_shifts
from vqarobust.metrics.uncertainty import Settings as Bootstrap


@dataclass(frozen=True)
class Settings:
    """The bootstrap of the mean shift's interval (the ``uncertainty`` section, resolved)."""

    bootstrap: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(Bootstrap.resolved(options.uncertainty))


def run(inputs: Inputs, settings: Settings) -> Result:
    """The maps, the per-question shifts and their means with intervals (empty without
    maps)."""
    paths = inputs.many("attention")
    maps = (
        # Each cast on its own: maps written before severities were int16 are int8.
        pl.concat(
            [pl.read_parquet(p).with_columns(pl.col("severity").cast(pl.Int16)) for p in paths]
        )
        if paths
        else pl.from_arrow(store.ATTENTION_SCHEMA.empty_table())
    )
    shifts = attention_shifts(maps)
    means = attention_shift_table(shifts, Bootstrap.from_mapping(settings.bootstrap))
    tables = {"attention_maps": maps, "attention_shifts": shifts, "attention_shift": means}
    return Result(tables={k: Table(v, ordered=True) for k, v in tables.items()})


ANALYSIS = Analysis(
    name="attention",
    doc=__doc__,
    tables={
        "attention_maps": "attention over the image per question and subset",
        "attention_shifts": "JS divergence from the clean map per question",
        "attention_shift": "mean shift per model x corruption x severity, with its interval",
    },
    settings_type=Settings,
    run=run,
    inputs=("attention",),
)

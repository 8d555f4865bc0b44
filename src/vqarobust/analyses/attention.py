"""Attention shift: how far each model's attention over the image moves from the clean
map under each corruption (docs/metrics.md, "Attention shift")."""

from __future__ import annotations

import polars as pl

from vqarobust import store
from vqarobust.analyses.base import Analysis, Inputs, NoSettings, Result, Table
from vqarobust.metrics.attention import attention_shift_table, attention_shifts


def run(inputs: Inputs, settings: NoSettings) -> Result:
    """The maps, the per-question shifts and their means (empty without maps)."""
    del settings
    paths = inputs.many("attention")
    maps = (
        pl.concat([pl.read_parquet(p) for p in paths])
        if paths
        else pl.from_arrow(store.ATTENTION_SCHEMA.empty_table())
    )
    shifts = attention_shifts(maps)
    tables = {"attention_maps": maps, "attention_shifts": shifts,
              "attention_shift": attention_shift_table(shifts)}  # fmt: skip
    return Result(tables={k: Table(v, ordered=True) for k, v in tables.items()})


ANALYSIS = Analysis(
    name="attention",
    doc=__doc__,
    tables={
        "attention_maps": "attention over the image per question and subset",
        "attention_shifts": "JS divergence from the clean map per question",
        "attention_shift": "mean shift per model x corruption x severity",
    },
    settings_type=NoSettings,
    run=run,
    inputs=("attention",),
)

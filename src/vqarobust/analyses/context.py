"""SwapMix context reliance (docs/context.md): reliance and effective accuracy per model,
the swap tables, flipped examples, and what each model reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics.context import context_tables, example_images, flipped_swaps
from vqarobust.metrics.context_paper import model_inputs


def model_reads(options: RunOptions) -> dict[str, dict[str, Any]] | None:
    """What ``model_inputs`` reads of each model entry: its feature source and whether it
    trains with SwapMix (None without a config: no ``model_inputs`` table)."""
    if options.models is None:
        return None
    reads: dict[str, dict[str, Any]] = {}
    for name, entry in options.models.items():
        read: dict[str, Any] = {"features": entry.get("features")}
        if entry.get("train") is not None:
            read["train"] = {"swapmix": bool(entry["train"].get("swapmix"))}
        reads[name] = read
    return reads


@dataclass(frozen=True)
class Settings:
    """``seed`` (which examples), what each model reads, the feature sources' kinds and
    the sources whose swap tables the job reads (in its input order)."""

    seed: int
    models: Mapping[str, Mapping[str, Any]] | None
    features: Mapping[str, Mapping[str, str]]
    feature_sources: list[str]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        kinds = {k: {"kind": v["kind"]} for k, v in options.features.items()}
        return cls(options.seed, model_reads(options), kinds, list(options.feature_sources))


def feature_swap_tables(inputs: Inputs, sources: list[str]) -> list[pl.DataFrame]:
    """Each feature source's swap table, with its source named."""
    paths = inputs.many("feature_swaps")
    return [
        pl.read_parquet(path).with_columns(pl.lit(source).alias("source"))
        for source, path in zip(sources, paths, strict=True)
    ]


def run(inputs: Inputs, settings: Settings) -> Result:
    """The context tables (reliance and effective accuracy always; empty without swaps)."""
    scored = inputs.table("_scored")
    tables = {k: Table(v) for k, v in context_tables(scored).items()}
    swaps_path = inputs.one("context_swaps")
    if swaps_path:
        swaps = pl.read_parquet(swaps_path)
        flips = flipped_swaps(scored, swaps, settings.seed)
        examples = example_images(
            flips,
            inputs.table("_questions"),
            str(inputs.one("clean_images")),
            str(inputs.one("context_images")),
        )
        tables["context_swaps"] = Table(swaps, ordered=True)
        tables["context_examples"] = Table(examples, ordered=True)
    if settings.models is not None:
        inputs_table = model_inputs(settings.models, settings.features)
        tables["model_inputs"] = Table(inputs_table, ordered=True)
    feature = feature_swap_tables(inputs, settings.feature_sources)
    if feature:
        tables["feature_swaps"] = Table(pl.concat(feature), ordered=True)
    return Result(tables=tables)


ANALYSIS = Analysis(
    name="context",
    doc=__doc__,
    tables={
        "context_reliance": "share of correct clean answers a swap changed, per model",
        "effective_accuracy": "accuracy on questions no swap changed, per model",
        "context_swaps": "the pixel swaps (object, donor, class, attributes)",
        "context_examples": "flipped swaps with thumbnails",
        "model_inputs": "what each model reads (pixels or a feature source) and its training",
        "feature_swaps": "the feature swaps of each source",
    },
    settings_type=Settings,
    run=run,
    requires=("scoring",),
    inputs=("context",),
)

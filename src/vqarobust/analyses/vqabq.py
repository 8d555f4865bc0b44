"""VQABQ (Huang et al.): the chain of basic questions, its thresholds and selection
(docs/text.md, "VQABQ"); only where ``basic_questions.vqabq.enabled``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics.vqabq import PAPER_THRESHOLDS, vqabq_tables


@dataclass(frozen=True)
class Settings:
    """``basic_questions.vqabq`` (ranker, thresholds, grid, tune share) and ``seed``."""

    ranker: str
    thresholds: str | Sequence[float]
    grid: bool
    tune_share: float
    seed: int

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        v = options.vqabq
        return cls(
            str(v.get("ranker", "")),
            v.get("thresholds", PAPER_THRESHOLDS),
            bool(v.get("grid")),
            float(v.get("tune_share", 0.5)),
            options.seed,
        )


def run(inputs: Inputs, settings: Settings) -> Result:
    """The VQABQ tables from the chain's scored answers and the ranker's rankings."""
    made = vqabq_tables(
        inputs.table("_scored"),
        inputs.table("_questions"),
        pl.read_parquet(inputs.one("vqabq_rankings")),
        settings.ranker,
        settings.thresholds,
        settings.grid,
        settings.tune_share,
        settings.seed,
    )
    return Result(tables={k: Table(v) for k, v in made.items()})


ANALYSIS = Analysis(
    name="vqabq",
    doc=__doc__,
    tables={
        "vqabq_scores": "Table 5: scores with the thresholds used",
        "vqabq_selection": "how many basic questions each question keeps (n_bq)",
        "vqabq_counts": "Table 6: main questions per number of basic questions kept",
        "vqabq": "accuracy with and without the chain per model",
    },
    settings_type=Settings,
    run=run,
    requires=("scoring",),
    inputs=("vqabq_rankings",),
    active=lambda options: bool(options.vqabq),
)

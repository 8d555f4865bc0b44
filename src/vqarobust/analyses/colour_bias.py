"""Colour bias: what models answer to colour questions about grayscale images
(docs/metrics.md, "Colour bias")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.analyses.images import image_folders, subset_pairs
from vqarobust.corruptions import COLOUR_BIAS, diagnostic
from vqarobust.metrics.colour_bias import colour_bias_examples, colour_bias_table, colour_rows
from vqarobust.metrics.uncertainty import Settings as Bootstrap


@dataclass(frozen=True)
class Settings:
    """``seed`` (which examples), the image subsets, and the bootstrap of the shares'
    intervals (the ``uncertainty`` section, resolved)."""

    seed: int
    image_subsets: Sequence[Sequence]
    bootstrap: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(
            options.seed,
            subset_pairs(options.image_subsets),
            Bootstrap.resolved(options.uncertainty),
        )


def decolouring(scored: pl.DataFrame) -> str | None:
    """The image perturbation of the run whose answers the tables read: the one tagged
    ``diagnostic=COLOUR_BIAS`` (grayscale; the first by name if plugins add more)."""
    image = scored.filter(pl.col("modality") == "image")["perturbation"].unique().to_list()
    return min((p for p in image if diagnostic(p) == COLOUR_BIAS), default=None)


def run(inputs: Inputs, settings: Settings) -> Result:
    """The colour-bias table and its examples (empty without grayscale)."""
    questions = inputs.table("_questions")
    scored = inputs.table("_scored")
    name = decolouring(scored)
    colour = colour_rows(scored, questions, name)
    folders = {(p, s): f for p, s, f in image_folders(inputs, settings.image_subsets)}
    # A single-severity transform: its subset is severity 1.
    examples = colour_bias_examples(colour, questions, folders.get((name, 1)), settings.seed)
    bias = colour_bias_table(colour, Bootstrap.from_mapping(settings.bootstrap))
    return Result(tables={"colour_bias": Table(bias), "colour_bias_examples": Table(examples)})


ANALYSIS = Analysis(
    name="colour_bias",
    doc=__doc__,
    tables={
        "colour_bias": "answers to colour questions on grayscale images, by kind",
        "colour_bias_examples": "examples with thumbnails",
    },
    settings_type=Settings,
    run=run,
    requires=("scoring",),
    inputs=("images",),
)

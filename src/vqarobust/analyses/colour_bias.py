"""Colour bias: what models answer to colour questions about grayscale images
(docs/metrics.md, "Colour bias")."""

from __future__ import annotations

from vqarobust.analyses.base import Analysis, Inputs, Result, Table
from vqarobust.analyses.images import ImageSettings, image_folders
from vqarobust.metrics.colour_bias import (
    GRAYSCALE,
    colour_bias_examples,
    colour_bias_table,
    colour_rows,
)


def run(inputs: Inputs, settings: ImageSettings) -> Result:
    """The colour-bias table and its examples (empty without grayscale)."""
    questions = inputs.table("_questions")
    colour = colour_rows(inputs.table("_scored"), questions)
    folders = {(p, s): f for p, s, f in image_folders(inputs, settings.image_subsets)}
    examples = colour_bias_examples(colour, questions, folders.get((GRAYSCALE, 1)), settings.seed)
    return Result(tables={"colour_bias": Table(colour_bias_table(colour)),
                          "colour_bias_examples": Table(examples)})  # fmt: skip


ANALYSIS = Analysis(
    name="colour_bias",
    doc=__doc__,
    tables={
        "colour_bias": "answers to colour questions on grayscale images, by kind",
        "colour_bias_examples": "examples with thumbnails",
    },
    settings_type=ImageSettings,
    run=run,
    requires=("scoring",),
    inputs=("images",),
)

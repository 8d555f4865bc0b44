"""How answers break: the kinds of wrong answers per subset, with examples (docs/metrics.md,
"Misprediction kinds")."""

from __future__ import annotations

import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, Result, Table
from vqarobust.analyses.images import ImageSettings, image_folders
from vqarobust.metrics.mispredictions import EXAMPLE_SCHEMA as MISPREDICTION_EXAMPLES
from vqarobust.metrics.mispredictions import (
    misprediction_examples,
    misprediction_rows,
    misprediction_table,
)


def run(inputs: Inputs, settings: ImageSettings) -> Result:
    """The kinds table, and examples where the clean images are there to show."""
    questions = inputs.table("_questions")
    wrong = misprediction_rows(inputs.table("_scored"), questions)
    folders = {(p, s): f for p, s, f in image_folders(inputs, settings.image_subsets)}
    examples = (
        misprediction_examples(wrong, questions, folders, settings.seed)
        if ("clean", 0) in folders
        else pl.DataFrame(schema=MISPREDICTION_EXAMPLES)
    )
    return Result(
        tables={
            "mispredictions": Table(misprediction_table(wrong)),
            "misprediction_examples": Table(examples),
        }
    )


ANALYSIS = Analysis(
    name="mispredictions",
    doc=__doc__,
    tables={
        "mispredictions": "wrong answers by kind per model x subset",
        "misprediction_examples": "a few examples of each kind, with thumbnails",
    },
    settings_type=ImageSettings,
    run=run,
    requires=("scoring",),
    inputs=("images",),
)

"""An analysis: how often a perturbation changes a model's answer, right or wrong (the
"flip rate" of consistency studies), per model x perturbation x severity."""

from __future__ import annotations

import polars as pl

from vqarobust.analyses.base import Analysis, Inputs, NoSettings, Result, Table
from vqarobust.analyses.registry import register


def answer_changes(predictions: pl.DataFrame) -> pl.DataFrame:
    """Per model x perturbed subset: the questions asked on it and on the clean images
    (``n``), those whose answer differs from the clean answer (``changed``), and the
    share."""
    clean = predictions.filter(pl.col("modality") == "clean").select(
        "model", "question_id", pl.col("answer").alias("clean_answer")
    )
    return (
        predictions.filter(pl.col("modality") != "clean")
        .join(clean, on=["model", "question_id"], how="inner")
        .group_by("model", "modality", "perturbation", "severity")
        .agg(
            pl.len().alias("n"), (pl.col("answer") != pl.col("clean_answer")).sum().alias("changed")
        )
        .with_columns((pl.col("changed") / pl.col("n")).alias("share"))
        .sort("model", "modality", "perturbation", "severity")
    )


def run(inputs: Inputs, settings: NoSettings) -> Result:
    """The answer-change table from the scored predictions (analysis ``scoring``)."""
    del settings
    return Result(
        tables={"answer_changes": Table(answer_changes(inputs.table("predictions")), ordered=True)}
    )


ANALYSIS = register(
    Analysis(
        name="answer_changes",
        doc=__doc__,
        tables={
            "answer_changes": "per model x perturbed subset, the share of questions "
            "whose answer differs from the clean answer"
        },
        settings_type=NoSettings,
        run=run,
        requires=("scoring",),
    )
)

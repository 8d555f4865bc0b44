"""Colour bias on grayscale images (the visual-robustness paper's Figure A.4).

A grayscale image holds no hue, so a colour question about it has one defensible kind of
answer: a shade of grey (:data:`GREYS`). A model that still answers "red" or "blue" is
answering from the question and its priors, not from the image: its *colour bias* is the
share of colour questions on grayscale images answered with a colour other than a grey.
The dataset's labels still name the original colours, so grayscale accuracy on colour
questions rewards the bias and punishes the right reading (the paper's mislabelling note);
grayscale is therefore kept out of VRE and the aggregates built with it unless the user
asks for it (``vre.include_grayscale``). The functions take the decolourizing
perturbation's name (the one tagged ``diagnostic=COLOUR_BIAS`` in the registry).

A *colour question* is one whose most frequent human answer (normalized as the official
VQA evaluation does) is a colour name (:data:`~vqarobust.metrics.mispredictions.COLOURS`).
"""

from __future__ import annotations

import os

import polars as pl

from vqarobust.metrics.mispredictions import COLOURS
from vqarobust.metrics.uncertainty import Settings, mean_intervals
from vqarobust.metrics.vqa_accuracy import normalize_column

# The examples' column of the answer on the decolourized image: a column of the
# colour_bias_examples table (the report reads it), named as the built-in perturbation.
DECOLOURED_ANSWER = "grayscale"
GREYS = frozenset({"gray", "grey", "black", "white", "silver"})
N_EXAMPLES = 3  # examples per model in the report

BIAS_SCHEMA = {
    "model": pl.String,
    "n_colour_questions": pl.Int64,
    "chromatic_share": pl.Float64,
    "grey_share": pl.Float64,
    "non_colour_share": pl.Float64,
    "clean_chromatic_share": pl.Float64,
    "accuracy": pl.Float64,
    "clean_accuracy": pl.Float64,
}
# The shares with a bootstrap interval over the images (``<share>_low``, ``<share>_high``).
SHARES = ("chromatic_share", "grey_share", "non_colour_share", "clean_chromatic_share")
BIAS_SCHEMA |= {f"{s}_{side}": pl.Float64 for s in SHARES for side in ("low", "high")}
EXAMPLE_SCHEMA = {
    "model": pl.String,
    "rank": pl.Int64,
    "question_id": pl.Int64,
    "question": pl.String,
    "truth": pl.String,
    "clean": pl.String,
    DECOLOURED_ANSWER: pl.String,
    "png": pl.Binary,
}


def colour_questions(questions: pl.DataFrame) -> pl.DataFrame:
    """(question_id, truth): the questions whose most frequent normalized human answer is
    a colour name (ties broken by the answer, so the choice does not depend on order)."""
    answers = questions.select("question_id", pl.col("answers")).explode("answers")
    answers = answers.filter(pl.col("answers").is_not_null())
    answers = normalize_column(answers, "answers", "answer")
    top = (
        answers.group_by("question_id", "answer")
        .len()
        .sort(["question_id", "len", "answer"], descending=[False, True, False])
        .group_by("question_id", maintain_order=True)
        .first()
    )
    return top.filter(pl.col("answer").is_in(list(COLOURS))).select(
        "question_id", pl.col("answer").alias("truth")
    )


def _answer_class(answer: pl.Expr) -> pl.Expr:
    return (
        pl.when(answer.is_in(list(GREYS)))
        .then(pl.lit("grey"))
        .when(answer.is_in(list(COLOURS)))
        .then(pl.lit("chromatic"))
        .otherwise(pl.lit("non_colour"))
    )


def colour_rows(
    scored: pl.DataFrame, questions: pl.DataFrame, perturbation: str | None
) -> pl.DataFrame:
    """Per model and colour question: the clean answers and those on the images of the
    decolourizing ``perturbation`` (normalized), their class (``chromatic``, ``grey``,
    ``non_colour``) and scores; empty without its predictions (or without one)."""
    if perturbation is None:
        return pl.DataFrame()
    colour = colour_questions(questions)
    pick = scored.filter(
        ((pl.col("modality") == "clean") & (pl.col("severity") == 0))
        | ((pl.col("modality") == "image") & (pl.col("perturbation") == perturbation))
    ).join(colour, on="question_id", how="inner")
    pick = pick.join(questions.select("question_id", "image_id"), on="question_id", how="left")
    if pick.filter(pl.col("perturbation") == perturbation).is_empty():
        return pl.DataFrame()
    pick = normalize_column(pick.with_columns(pl.col("answer").fill_null("")), "answer", "norm")
    decoloured = pl.col("perturbation") == perturbation
    side = pl.when(decoloured).then(pl.lit("g")).otherwise(pl.lit("c"))
    wide = pick.with_columns(side.alias("side")).pivot(
        "side", index=["model", "question_id", "image_id", "truth"], values=["norm", "score"]
    )
    return wide.filter(pl.col("norm_g").is_not_null()).with_columns(
        _answer_class(pl.col("norm_g")).alias("class"),
        _answer_class(pl.col("norm_c")).alias("clean_class"),
    )


def colour_bias_table(rows: pl.DataFrame, uncertainty: Settings | None = None) -> pl.DataFrame:
    """Per model: colour questions asked on grayscale images, the shares of their answers
    that are a chromatic colour, a grey or no colour, the chromatic share of the same
    questions on the clean images, and the accuracy on them (grayscale and clean); each
    share with its bootstrap interval over the images (:data:`SHARES`;
    :func:`vqarobust.metrics.uncertainty.mean_intervals` with the run's ``uncertainty``
    settings)."""
    if rows.is_empty():
        return pl.DataFrame(schema=BIAS_SCHEMA)
    kinds = {
        "chromatic_share": ("class", "chromatic"),
        "grey_share": ("class", "grey"),
        "non_colour_share": ("class", "non_colour"),
        "clean_chromatic_share": ("clean_class", "chromatic"),
    }
    flags = rows.with_columns(
        (pl.col(col) == kind).cast(pl.Float64).alias(name) for name, (col, kind) in kinds.items()
    )
    bounds = mean_intervals(flags, ["model"], list(SHARES), "image_id", uncertainty or Settings())
    return (
        _point_bias(rows)
        .join(bounds, on="model", how="left")
        .select(list(BIAS_SCHEMA))
        .cast(BIAS_SCHEMA)  # type: ignore[arg-type]
    )


def _point_bias(rows: pl.DataFrame) -> pl.DataFrame:
    share = lambda c, col="class": (pl.col(col) == c).mean()  # noqa: E731
    return (
        rows.group_by("model")
        .agg(
            pl.len().alias("n_colour_questions"),
            share("chromatic").alias("chromatic_share"),
            share("grey").alias("grey_share"),
            share("non_colour").alias("non_colour_share"),
            share("chromatic", "clean_class").alias("clean_chromatic_share"),
            pl.col("score_g").mean().alias("accuracy"),
            pl.col("score_c").mean().alias("clean_accuracy"),
        )
        .sort("model")
    )


def colour_bias_examples(
    rows: pl.DataFrame,
    questions: pl.DataFrame,
    folder: str | os.PathLike[str] | None,
    seed: int,
    n: int = N_EXAMPLES,
) -> pl.DataFrame:
    """Up to ``n`` seeded examples per model of a chromatic answer on a grayscale image,
    with a thumbnail of the grayscale image (``folder``; none without it)."""
    from vqarobust import store
    from vqarobust.samples import thumbnail
    from vqarobust.seeding import derive_seed

    biased = rows.filter(pl.col("class") == "chromatic") if not rows.is_empty() else rows
    if biased.is_empty() or folder is None:
        return pl.DataFrame(schema=EXAMPLE_SCHEMA)
    keyed = biased.with_columns(
        pl.struct("model", "question_id")
        .map_elements(
            lambda r: derive_seed(seed, "colour_bias", *r.values()), return_dtype=pl.Int64
        )
        .alias("_key")
    )
    picked = keyed.sort("model", "_key").group_by("model", maintain_order=True).head(n)
    picked = picked.with_columns(pl.int_range(1, pl.len() + 1).over("model").alias("rank"))
    picked = picked.join(questions.select("question_id", "image_id", "question"), on="question_id")
    images = store.ImageShards(folder).read(sorted(set(picked["image_id"].to_list())))
    png = [thumbnail(images[i]) for i in picked["image_id"]]
    out = picked.with_columns(pl.Series("png", png, pl.Binary)).rename(
        {"norm_c": "clean", "norm_g": DECOLOURED_ANSWER}
    )
    return out.select(list(EXAMPLE_SCHEMA)).cast(EXAMPLE_SCHEMA).sort("model", "rank")

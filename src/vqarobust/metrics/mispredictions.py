"""What kind of mistake a perturbation causes (the visual-robustness paper's Table A.3).

Every question a model answers correctly on the clean subset (score 1) and wrongly on a
perturbed one (score 0) is a *misprediction*; both answers are compared after the official
VQA normalization (lower case, number words as digits, articles dropped) and the first
rule that holds names its kind:

1. ``yes_no_flip``: both answers are yes or no.
2. ``blindness``: the perturbed answer is "nothing", "none", "no", "0" or empty, and the
   clean one is none of these (it named something).
3. ``miscolour``: both answers are colour names (:data:`COLOURS`).
4. ``miscount_under`` / ``miscount_over``: both answers are whole numbers; the perturbed one
   is smaller / larger.
5. ``misclassification``: the perturbed answer is in the answer vocabulary of the
   question's type (any human answer to a question of that type in the dataset), as the
   clean one is: the model named another thing of the right kind.
6. ``other``: anything else (an answer of the wrong kind: the paper's "irrationality").
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import polars as pl

from vqarobust.metrics.vqa_accuracy import normalize_answer

KINDS = (
    "yes_no_flip",
    "blindness",
    "miscolour",
    "miscount_under",
    "miscount_over",
    "misclassification",
    "other",
)
COLOURS = frozenset(
    {
        "red",
        "orange",
        "yellow",
        "green",
        "blue",
        "purple",
        "violet",
        "pink",
        "brown",
        "black",
        "white",
        "gray",
        "grey",
        "silver",
        "gold",
        "beige",
        "tan",
        "teal",
        "turquoise",
        "cyan",
        "magenta",
        "maroon",
        "navy",
        "olive",
        "cream",
        "khaki",
        "lime",
        "indigo",
    }
)
# After normalization "none" is "0".
BLIND = frozenset({"nothing", "none", "no", "0", ""})


def classify(pairs: pl.DataFrame, vocabulary: pl.DataFrame | None = None) -> pl.Series:
    """The kind of each (``clean``, ``perturbed``) answer pair, by the module's rules.

    ``pairs`` has ``clean`` and ``perturbed`` answers and, for the misclassification rule,
    ``question_type``; ``vocabulary`` has (``question_type``, ``answer``) rows, answers
    normalized (:func:`answer_vocabulary`). Without it no pair is a misclassification.
    """
    distinct = pl.concat([pairs["clean"], pairs["perturbed"]]).fill_null("").unique()
    norm = pl.DataFrame({"raw": distinct}).with_columns(
        pl.col("raw").map_elements(normalize_answer, return_dtype=pl.String).alias("norm")
    )
    lookup = dict(norm.iter_rows())
    df = pairs.with_columns(
        pl.col("clean").fill_null("").replace_strict(lookup, return_dtype=pl.String).alias("_c"),
        pl.col("perturbed")
        .fill_null("")
        .replace_strict(lookup, return_dtype=pl.String)
        .alias("_p"),
    ).with_row_index("_row")
    if vocabulary is not None and "question_type" in df.columns:
        known = vocabulary.select(
            "question_type", pl.col("answer").alias("_p"), pl.lit(True).alias("_pv")
        )
        df = df.join(known, on=["question_type", "_p"], how="left")
        known_c = known.rename({"_p": "_c", "_pv": "_cv"})
        df = df.join(known_c, on=["question_type", "_c"], how="left").sort("_row")
    else:
        df = df.with_columns(
            pl.lit(None, pl.Boolean).alias("_pv"), pl.lit(None, pl.Boolean).alias("_cv")
        )
    yes_no = pl.col("_c").is_in(["yes", "no"]) & pl.col("_p").is_in(["yes", "no"])
    blind = pl.col("_p").is_in(list(BLIND)) & ~pl.col("_c").is_in(list(BLIND))
    colours = pl.col("_c").is_in(list(COLOURS)) & pl.col("_p").is_in(list(COLOURS))
    digits = pl.col("_c").str.contains(r"^\d+$") & pl.col("_p").str.contains(r"^\d+$")
    smaller = pl.col("_p").cast(pl.Int64, strict=False) < pl.col("_c").cast(pl.Int64, strict=False)
    vocab = pl.col("_pv").fill_null(False) & pl.col("_cv").fill_null(False)
    kind = (
        pl.when(yes_no)
        .then(pl.lit("yes_no_flip"))
        .when(blind)
        .then(pl.lit("blindness"))
        .when(colours)
        .then(pl.lit("miscolour"))
        .when(digits & smaller)
        .then(pl.lit("miscount_under"))
        .when(digits)
        .then(pl.lit("miscount_over"))
        .when(vocab)
        .then(pl.lit("misclassification"))
        .otherwise(pl.lit("other"))
    )
    return df.select(kind.alias("kind"))["kind"]


def answer_vocabulary(questions: pl.DataFrame) -> pl.DataFrame:
    """(``question_type``, ``answer``): every normalized human answer per question type."""
    answers = questions.select("question_type", pl.col("answers")).explode("answers")
    answers = answers.filter(pl.col("answers").is_not_null()).unique()
    return (
        answers.with_columns(
            pl.col("answers").map_elements(normalize_answer, return_dtype=pl.String).alias("answer")
        )
        .select("question_type", "answer")
        .unique()
    )


def misprediction_rows(scored: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """Every clean-correct -> perturbed-wrong answer, with its kind: model, modality,
    perturbation, severity, question_id, question_type, clean, perturbed, kind.

    ``scored`` holds per-question predictions with ``score`` (context swaps excluded
    here: they have their own tables)."""
    clean = scored.filter((pl.col("modality") == "clean") & (pl.col("score") == 1.0)).select(
        "model", "question_id", pl.col("answer").alias("clean")
    )
    wrong = scored.filter(
        ~pl.col("modality").is_in(["clean", "context"]) & (pl.col("score") == 0.0)
    ).select(
        "model",
        "modality",
        "perturbation",
        "severity",
        "question_id",
        pl.col("answer").alias("perturbed"),
    )
    pairs = wrong.join(clean, on=["model", "question_id"]).join(
        questions.select("question_id", "question_type"), on="question_id"
    )
    kinds = classify(pairs, answer_vocabulary(questions))
    return pairs.with_columns(kinds).sort(
        "model", "modality", "perturbation", "severity", "question_id"
    )


def misprediction_table(rows: pl.DataFrame) -> pl.DataFrame:
    """Per model x modality x perturbation x severity x kind: ``n`` and ``share`` of that
    subset's mispredictions (kinds that do not occur are 0 rows, so shares sum to 1)."""
    keys = ["model", "modality", "perturbation", "severity"]
    subsets = rows.select(keys).unique()
    grid = subsets.join(pl.DataFrame({"kind": list(KINDS)}), how="cross")
    counts = rows.group_by(*keys, "kind").agg(pl.len().alias("n"))
    out = grid.join(counts, on=[*keys, "kind"], how="left").with_columns(
        pl.col("n").fill_null(0).cast(pl.Int64)
    )
    out = out.with_columns((pl.col("n") / pl.col("n").sum().over(keys)).alias("share"))
    order = {k: i for i, k in enumerate(KINDS)}
    return (
        out.with_columns(pl.col("kind").replace_strict(order, return_dtype=pl.Int64).alias("_k"))
        .sort(*keys, "_k")
        .drop("_k")
    )


N_EXAMPLES = 2  # examples per kind in the report

EXAMPLE_SCHEMA = {
    "kind": pl.String,
    "rank": pl.Int64,
    "model": pl.String,
    "modality": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int16,
    "question_id": pl.Int64,
    "question": pl.String,
    "truth": pl.String,
    "clean": pl.String,
    "perturbed": pl.String,
    "clean_png": pl.Binary,
    "perturbed_png": pl.Binary,
}


def misprediction_examples(
    rows: pl.DataFrame,
    questions: pl.DataFrame,
    folders: Mapping[tuple[str, int], str | os.PathLike[str]],
    seed: int,
    n: int = N_EXAMPLES,
) -> pl.DataFrame:
    """``n`` seeded examples per kind (a per-row hash of seed, model, subset and question,
    so the choice does not depend on row order), with thumbnails of the clean image and of
    the image the model saw (``folders``: (perturbation, severity) -> image folder, with
    ``("clean", 0)``; a question perturbation was asked about the clean image)."""
    from vqarobust import store
    from vqarobust.samples import thumbnail, thumbnail_beside
    from vqarobust.seeding import derive_seed

    if rows.is_empty():
        return pl.DataFrame(schema=EXAMPLE_SCHEMA)
    keyed = rows.with_columns(
        pl.struct("model", "modality", "perturbation", "severity", "question_id")
        .map_elements(
            lambda r: derive_seed(seed, "misprediction", *r.values()), return_dtype=pl.Int64
        )
        .alias("_key")
    )
    picked = keyed.sort("_key").group_by("kind", maintain_order=True).head(n)
    picked = picked.with_columns(pl.int_range(1, pl.len() + 1).over("kind").alias("rank"))
    info = questions.select(
        "question_id", "image_id", "question", pl.col("answers").list.first().alias("truth")
    )
    picked = picked.join(info, on="question_id")
    clean_dir = folders[("clean", 0)]
    shown = {}
    for perturbation, severity, image_id in picked.select(
        "perturbation", "severity", "image_id"
    ).iter_rows():
        folder = folders.get((perturbation, int(severity)), clean_dir)
        shown.setdefault(str(folder), set()).add(image_id)
    shown.setdefault(str(clean_dir), set())
    shown[str(clean_dir)] |= set(picked["image_id"].to_list())
    images = {f: store.ImageShards(f).read(sorted(ids)) for f, ids in shown.items()}
    clean_png = [thumbnail(images[str(clean_dir)][i]) for i in picked["image_id"]]
    seen_png = [
        thumbnail_beside(
            images[str(folders.get((p, int(s)), clean_dir))][i], images[str(clean_dir)][i]
        )
        for p, s, i in picked.select("perturbation", "severity", "image_id").iter_rows()
    ]
    out = picked.with_columns(
        pl.Series("clean_png", clean_png, pl.Binary),
        pl.Series("perturbed_png", seen_png, pl.Binary),
    )
    order = {k: i for i, k in enumerate(KINDS)}
    out = out.with_columns(
        pl.col("kind").replace_strict(order, return_dtype=pl.Int64).alias("_k")
    ).sort("_k", "rank")
    return out.select(list(EXAMPLE_SCHEMA)).cast(EXAMPLE_SCHEMA)

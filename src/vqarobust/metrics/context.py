"""Context reliance and effective accuracy (SwapMix; docs/metrics.md).

From scored predictions: the clean answer of each question and its answers under every
swap of its context objects (modality ``context``, perturbation ``swap_class`` or
``swap_attribute``, severity = the swap's index).

* **Context reliance** of a model: among the questions it answers correctly on the clean
  image (full VQA credit), the share whose answer changes under any swap. Per
  perturbation, and ``all`` for any swap of either kind.
* **Effective accuracy**: the share of all questions answered correctly on the clean
  image whose answer no swap changes. Per perturbation and ``all``; ``accuracy`` is the
  clean accuracy on the same questions, for comparison.

As the SwapMix paper's benchmark script counts them: a question without context objects
(no swaps) cannot change, and it is in both denominators (correctly answered: in
reliance's, never changed; in effective accuracy's, effective when correct). "Changes"
means another answer than the clean one, even where that answer would also get full
credit (VQAv2's several accepted answers), so effective = correct - changed.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from vqarobust.metrics.uncertainty import OBSERVED, ClusterSums, cluster_sums, observed_sums

CORRECT = 1.0  # full VQA credit
RELIANCE_SCHEMA = {
    "model": pl.String,
    "perturbation": pl.String,
    "n_correct": pl.Int64,
    "n_changed": pl.Int64,
    "reliance": pl.Float64,
}
EFFECTIVE_SCHEMA = {
    "model": pl.String,
    "perturbation": pl.String,
    "n_questions": pl.Int64,
    "n_swapped": pl.Int64,
    "accuracy": pl.Float64,
    "n_effective": pl.Int64,
    "effective_accuracy": pl.Float64,
}


def _per_question(scored: pl.DataFrame) -> pl.DataFrame:
    """Per (model, perturbation incl. ``all``, question): any answer changed, number of
    swaps."""
    clean = scored.filter(pl.col("modality") == "clean").select(
        "model", "question_id", pl.col("answer").alias("clean_answer")
    )
    swaps = scored.filter(pl.col("modality") == "context").join(
        clean, on=["model", "question_id"], how="inner"
    )
    both = pl.concat([swaps, swaps.with_columns(pl.lit("all").alias("perturbation"))])
    return both.group_by("model", "perturbation", "question_id").agg(
        (pl.col("answer") != pl.col("clean_answer")).any().alias("changed"),
        pl.len().alias("n_swaps"),
    )


def context_flags(scored: pl.DataFrame) -> pl.DataFrame:
    """Per (model, perturbation incl. ``all``, clean question): ``correct`` on the clean
    image, ``score``, ``n_swaps`` (null without swaps), ``changed`` under any swap (false
    without swaps), ``counts_for_reliance`` (correct) and ``effective`` (correct and not
    changed). Both context tables, and their bootstrap intervals, are sums of these."""
    per_q = _per_question(scored)
    clean = scored.filter(pl.col("modality") == "clean").select(
        "model", "question_id", (pl.col("score") >= CORRECT).alias("correct"), "score"
    )
    perturbations = per_q.select("perturbation").unique()
    grid = clean.join(perturbations, how="cross").join(
        per_q, on=["model", "perturbation", "question_id"], how="left"
    )
    grid = grid.with_columns(pl.col("changed").fill_null(False))
    return grid.with_columns(
        pl.col("correct").alias("counts_for_reliance"),
        (pl.col("correct") & ~pl.col("changed")).alias("effective"),
    )


def context_sums(flags: pl.DataFrame, n_clusters: int | None = None) -> ClusterSums:
    """Per (model, perturbation) sums of the :func:`context_flags` questions: ``num``
    (correct and changed), ``den`` (correct), ``eff`` (effective), ``swapped`` (has swaps)
    and ``score``; per cluster when ``flags`` carries a ``cluster`` column of
    ``n_clusters``, else the observed sums alone."""
    flags = flags.with_columns(
        pl.col("counts_for_reliance").cast(pl.Float64).alias("den"),
        (pl.col("counts_for_reliance") & pl.col("changed")).cast(pl.Float64).alias("num"),
        pl.col("effective").cast(pl.Float64).alias("eff"),
        pl.col("n_swaps").is_not_null().cast(pl.Float64).alias("swapped"),
    )
    keys, values = ["model", "perturbation"], ["num", "den", "eff", "swapped", "score"]
    if n_clusters is None:
        return observed_sums(flags, keys, values)
    return cluster_sums(flags, keys, values, n_clusters)


def context_arrays(sums: ClusterSums, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernel of both context statistics: reliance (changed / correct, NaN without a
    correct question) and effective accuracy (effective / all) per key of ``sums`` in
    every replicate of ``weights`` (row 0: the data as observed)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        reliance = sums.totals("num", weights) / sums.totals("den", weights)
    return reliance, sums.means("eff", weights)


def context_tables(scored: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """``context_reliance`` and ``effective_accuracy`` from scored predictions (columns
    model, modality, perturbation, question_id, answer, score): :func:`context_arrays` at
    the observed data. Empty without context predictions; a model with no correct clean
    answer has no reliance row."""
    if scored.filter(pl.col("modality") == "context").is_empty():
        return {
            "context_reliance": pl.DataFrame(schema=RELIANCE_SCHEMA),
            "effective_accuracy": pl.DataFrame(schema=EFFECTIVE_SCHEMA),
        }
    sums = context_sums(context_flags(scored))
    reliance, effective = (a[0] for a in context_arrays(sums, OBSERVED))

    def total(col: str) -> pl.Series:
        return pl.Series(sums.totals(col, OBSERVED)[0]).cast(pl.Int64)

    table = sums.keys.with_columns(
        n_correct=total("den"),
        n_changed=total("num"),
        reliance=pl.Series(reliance),
        n_questions=pl.Series(sums.n).cast(pl.Int64),
        n_swapped=total("swapped"),
        accuracy=pl.Series(sums.means("score", OBSERVED)[0]),
        n_effective=total("eff"),
        effective_accuracy=pl.Series(effective),
    )
    return {
        "context_reliance": table.filter(pl.col("n_correct") > 0)
        .cast(RELIANCE_SCHEMA)
        .select(list(RELIANCE_SCHEMA))
        .sort("model", "perturbation"),
        "effective_accuracy": table.cast(EFFECTIVE_SCHEMA)
        .select(list(EFFECTIVE_SCHEMA))
        .sort("model", "perturbation"),
    }


GROUP_SCHEMA = {
    "model": pl.String,
    "group": pl.String,
    "n_questions": pl.Int64,
    "accuracy": pl.Float64,
    "reliance": pl.Float64,
}


def context_by_group(scored: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame:
    """Clean accuracy and reliance (any swap) per model and question group: ``groups``
    maps ``question_id`` to ``group`` (e.g. the scenes question kind). Questions without
    a group are left out; reliance is null where a model answers none correctly."""
    scored = scored.join(groups.select("question_id", "group"), on="question_id")
    parts = []
    for (group,) in scored.select("group").unique().sort("group").iter_rows():
        tables = context_tables(scored.filter(pl.col("group") == group).drop("group"))
        parts.append(
            tables["effective_accuracy"]
            .filter(pl.col("perturbation") == "all")
            .join(tables["context_reliance"], on=["model", "perturbation"], how="left")
            .select("model", pl.lit(group).alias("group"), "n_questions", "accuracy", "reliance")
        )
    if not parts:
        return pl.DataFrame(schema=GROUP_SCHEMA)
    return pl.concat(parts).cast(GROUP_SCHEMA).sort("model", "group")


N_EXAMPLES = 6
EXAMPLE_SCHEMA = {
    "rank": pl.Int32,
    "model": pl.String,
    "question_id": pl.Int64,
    "question": pl.String,
    "truth": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int16,
    "before": pl.String,
    "after": pl.String,
    "clean_answer": pl.String,
    "swapped_answer": pl.String,
    "clean_png": pl.Binary,
    "swapped_png": pl.Binary,
}


def flipped_swaps(
    scored: pl.DataFrame, swaps: pl.DataFrame, seed: int, n: int = N_EXAMPLES
) -> pl.DataFrame:
    """Up to ``n`` swaps that changed a correct clean answer, one per question, chosen by a
    seeded hash (the same run shows the same examples), with what was swapped."""
    from vqarobust.seeding import derive_seed

    clean = scored.filter(pl.col("modality") == "clean", pl.col("score") >= CORRECT).select(
        "model", "question_id", pl.col("answer").alias("clean_answer")
    )
    flips = (
        scored.filter(pl.col("modality") == "context")
        .join(clean, on=["model", "question_id"])
        .filter(pl.col("answer") != pl.col("clean_answer"))
        .join(swaps.drop("rank", strict=False), on=["question_id", "perturbation", "severity"])
        .rename({"answer": "swapped_answer"})
    )
    if flips.is_empty():
        return flips
    keys = flips.select("model", "question_id", "perturbation", "severity").rows()
    flips = flips.with_columns(
        pl.Series("order", [derive_seed(seed, "flip", *k) for k in keys], pl.UInt64)
    ).sort("order")
    return flips.unique("question_id", keep="first", maintain_order=True).head(n)


def example_images(
    flips: pl.DataFrame,
    questions: pl.DataFrame,
    clean_dir: str,
    swapped_dir: str,
) -> pl.DataFrame:
    """The flipped swaps with thumbnails of the clean and the swapped image."""
    from vqarobust import store
    from vqarobust.samples import thumbnail

    if flips.is_empty():
        return pl.DataFrame(schema=EXAMPLE_SCHEMA)
    clean = store.ImageShards(clean_dir).read(flips["source_image_id"].unique().to_list())
    swapped = store.ImageShards(swapped_dir).read(flips["image_id"].unique().to_list())
    info = questions.select(
        "question_id", "question", pl.col("answers").list.first().alias("truth")
    )
    rows = flips.join(info, on="question_id").with_row_index("rank", offset=1)
    return (
        rows.with_columns(
            pl.col("source_image_id")
            .map_elements(lambda i: thumbnail(clean[i], 128), return_dtype=pl.Binary)
            .alias("clean_png"),
            pl.col("image_id")
            .map_elements(lambda i: thumbnail(swapped[i], 128), return_dtype=pl.Binary)
            .alias("swapped_png"),
        )
        .cast(EXAMPLE_SCHEMA)
        .select(list(EXAMPLE_SCHEMA))
    )

"""Attention shift (the visual-robustness paper's Figure 5; docs/metrics.md): how far a
model's attention over the image moves when the image is corrupted.

Each attention map (:mod:`vqarobust.attention`) is a distribution over the image's patch
grid. The shift of a question on a corrupted subset is the Jensen-Shannon divergence (base
2, so in [0, 1]: 0 for identical maps, 1 for disjoint ones) between its map there and its
map on the clean image; ``attention_shift`` holds its mean, the mean's bootstrap interval
over the images and the deviation over the sampled questions per model x corruption x
severity.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from vqarobust.metrics.uncertainty import Settings, mean_intervals

SHIFT_SCHEMA = {
    "model": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int16,
    "question_id": pl.Int64,
    "image_id": pl.Int64,
    "js_divergence": pl.Float64,
}
SUMMARY_SCHEMA = {
    "model": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int16,
    "n_questions": pl.Int64,
    "js_mean": pl.Float64,
    "js_low": pl.Float64,
    "js_high": pl.Float64,
    "js_std": pl.Float64,
}


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence in bits between the rows of ``p`` and ``q`` (each row a
    distribution; rows are renormalized to sum 1): 0.5 KL(p||m) + 0.5 KL(q||m) with
    m = (p + q) / 2, where 0 log 0 = 0."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"distributions differ in shape: {p.shape} and {q.shape}")
    p = p / p.sum(axis=-1, keepdims=True)
    q = q / q.sum(axis=-1, keepdims=True)
    m = (p + q) / 2

    def kl(a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0, a * np.log2(a / m), 0.0)
        return terms.sum(axis=-1)

    return np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0)


def attention_shifts(maps: pl.DataFrame) -> pl.DataFrame:
    """Per model x corrupted subset x question, the JS divergence of its map from the
    clean map of the same question (SHIFT_SCHEMA). ``maps`` has the columns of
    :data:`vqarobust.store.ATTENTION_SCHEMA`; a map whose grid differs from the clean
    one (an image stored at another size) is an error naming it."""
    if maps.is_empty():
        return pl.DataFrame(schema=SHIFT_SCHEMA)
    clean = maps.filter(pl.col("perturbation") == "clean").select(
        "model",
        "question_id",
        pl.col("rows").alias("_r"),
        pl.col("cols").alias("_c"),
        pl.col("weights").alias("_clean"),
    )
    pert = maps.filter(pl.col("perturbation") != "clean").join(
        clean, on=["model", "question_id"], how="left"
    )
    lost = pert.filter(pl.col("_clean").is_null())
    if lost.height:
        raise ValueError(
            f"{lost.height} attention maps have no clean map of their question, "
            f"e.g. {lost.select('model', 'question_id').row(0)}"
        )
    odd = pert.filter((pl.col("rows") != pl.col("_r")) | (pl.col("cols") != pl.col("_c")))
    if odd.height:
        r = odd.row(0, named=True)
        raise ValueError(
            f"attention grid of {r['model']} on {r['perturbation']}/"
            f"{r['severity']} question {r['question_id']} is {r['rows']}x"
            f"{r['cols']}, its clean grid {r['_r']}x{r['_c']}"
        )
    out = []
    # One matrix per grid size: every row of a block has the same length.
    for _, block in pert.group_by("_r", "_c"):
        p = np.array(block["weights"].to_list(), dtype=np.float64)
        q = np.array(block["_clean"].to_list(), dtype=np.float64)
        out.append(
            block.select(
                "model", "perturbation", "severity", "question_id", "image_id"
            ).with_columns(pl.Series("js_divergence", js_divergence(p, q)))
        )
    return (
        pl.concat(out)
        .cast(SHIFT_SCHEMA)  # type: ignore[arg-type]
        .sort("model", "perturbation", "severity", "question_id")
    )


def attention_shift_table(
    shifts: pl.DataFrame, uncertainty: Settings | None = None
) -> pl.DataFrame:
    """Mean and sample deviation of the JS divergence per model x corruption x severity,
    and the bootstrap interval of the mean over the images (``js_low``, ``js_high``;
    :func:`vqarobust.metrics.uncertainty.mean_intervals` with the run's ``uncertainty``
    settings: ``shifts`` carry each question's ``image_id``)."""
    keys = ["model", "perturbation", "severity"]
    bounds = mean_intervals(shifts, keys, ["js_divergence"], "image_id", uncertainty or Settings())
    bounds = bounds.rename({"js_divergence_low": "js_low", "js_divergence_high": "js_high"})
    if shifts.is_empty():
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    return (
        _point_shift(shifts)
        .join(bounds, on=keys, how="left")
        .select(list(SUMMARY_SCHEMA))
        .cast(SUMMARY_SCHEMA)  # type: ignore[arg-type]
    )


def _point_shift(shifts: pl.DataFrame) -> pl.DataFrame:
    return (
        shifts.group_by("model", "perturbation", "severity")
        .agg(
            pl.len().alias("n_questions"),
            pl.col("js_divergence").mean().alias("js_mean"),
            pl.col("js_divergence").std().alias("js_std"),
        )
        .sort("model", "perturbation", "severity")
    )

"""R_score (docs/metrics.md): robustness of accuracy to a perturbation, in [0, 1].

Acc_di = |Acc_clean - Acc_noisy| in percentage points;
R_score = clamp((sqrt(m) - sqrt(Acc_di)) / (sqrt(m) - sqrt(t)), 0, 1), with tolerance t and
maximum m, 0 <= t < m <= 100 (defaults t = 0.05, m = 20). It is 1 when the drop is within
tolerance and 0 at or beyond m. t and m are stored next to every value.

One R_score per perturbation over all its levels (:func:`rscore_overall_table`): the
R_score of the mean deterioration over the levels, the basic-question paper's single
R_score per basic-question dataset (R_score1 on the general one, R_score2 on the yes/no
one; docs/metrics.md says why the mean is taken before the score).
"""

from __future__ import annotations

import math

import polars as pl

from vqarobust.metrics.coverage import check_coverage
from vqarobust.metrics.robustness import CLEAN

DEFAULT_TOLERANCE = 0.05
DEFAULT_MAXIMUM = 20.0


def check_bounds(tolerance: float, maximum: float) -> None:
    """Raise unless 0 <= tolerance < maximum <= 100."""
    if not 0 <= tolerance < maximum <= 100:
        raise ValueError(f"R_score needs 0 <= t < m <= 100, got t={tolerance}, m={maximum}")


def r_score(
    acc_clean: float,
    acc_noisy: float,
    tolerance: float = DEFAULT_TOLERANCE,
    maximum: float = DEFAULT_MAXIMUM,
) -> float:
    """R_score of one pair of accuracies given as fractions in [0, 1]."""
    check_bounds(tolerance, maximum)
    di = abs(acc_clean - acc_noisy) * 100
    value = (math.sqrt(maximum) - math.sqrt(di)) / (math.sqrt(maximum) - math.sqrt(tolerance))
    return min(max(value, 0.0), 1.0)


def rscore_table(
    accuracy: pl.DataFrame,
    tolerance: float = DEFAULT_TOLERANCE,
    maximum: float = DEFAULT_MAXIMUM,
    on_missing: str = "error",
) -> pl.DataFrame:
    """R_score per model x perturbation x severity, and per model x severity over all
    perturbations (group ``all``: mean noisy accuracy at that severity). Gaps are an
    error unless ``on_missing="drop"`` (:func:`vqarobust.metrics.coverage.check_coverage`).
    """
    check_bounds(tolerance, maximum)
    accuracy = check_coverage(accuracy, on_missing, "R_score")
    clean = (
        accuracy.filter(pl.col("severity") == 0)
        .group_by("model")
        .agg(pl.col("accuracy").mean().alias("acc_clean"))
    )
    pert = accuracy.filter((pl.col("severity") > 0) & (pl.col("corruption") != CLEAN))
    overall = (
        pert.group_by("model", "severity")
        .agg(pl.col("accuracy").mean())
        .with_columns(pl.lit("all").alias("corruption"))
    )
    rows = pl.concat(
        [pert.select("model", "corruption", "severity", "accuracy"),
         overall.select("model", "corruption", "severity", "accuracy")]
    )  # fmt: skip
    di = ((pl.col("acc_clean") - pl.col("acc_noisy")).abs() * 100).alias("acc_di")
    sm, st = math.sqrt(maximum), math.sqrt(tolerance)
    score = ((sm - pl.col("acc_di").sqrt()) / (sm - st)).clip(0.0, 1.0)
    return (
        rows.rename({"accuracy": "acc_noisy"})
        .join(clean, on="model", how="inner")
        .with_columns(di)
        .with_columns(
            score.alias("rscore"),
            pl.lit(tolerance).alias("tolerance"),
            pl.lit(maximum).alias("maximum"),
        )
        .select(
            "model",
            "corruption",
            "severity",
            "acc_clean",
            "acc_noisy",
            "acc_di",
            "rscore",
            "tolerance",
            "maximum",
        )  # fmt: skip
        .sort("model", "corruption", "severity")
    )


def overall_score(mean_di: pl.Expr, tolerance: float, maximum: float) -> pl.Expr:
    """R_score of a deterioration already in percentage points."""
    sm, st = math.sqrt(maximum), math.sqrt(tolerance)
    return ((sm - mean_di.sqrt()) / (sm - st)).clip(0.0, 1.0)


def rscore_overall_table(rscore: pl.DataFrame) -> pl.DataFrame:
    """Per model x perturbation of an :func:`rscore_table`: the mean deterioration over
    its levels (``acc_di``, percentage points), their number, and the R_score of that
    mean (``rscore``) with the table's t and m. The per-severity group ``all`` is left out."""
    per = rscore.filter(pl.col("corruption") != "all")
    if not per.height:
        return pl.DataFrame(schema={"model": pl.String, "corruption": pl.String,
                                    "levels": pl.Int64, "acc_clean": pl.Float64,
                                    "acc_di": pl.Float64, "rscore": pl.Float64,
                                    "tolerance": pl.Float64, "maximum": pl.Float64})  # fmt: skip
    t, m = per["tolerance"][0], per["maximum"][0]
    return (
        per.group_by("model", "corruption")
        .agg(
            pl.len().cast(pl.Int64).alias("levels"),
            pl.col("acc_clean").first(),
            pl.col("acc_di").mean(),
        )
        .with_columns(
            overall_score(pl.col("acc_di"), t, m).alias("rscore"),
            pl.lit(t).alias("tolerance"),
            pl.lit(m).alias("maximum"),
        )
        .sort("model", "corruption")
    )

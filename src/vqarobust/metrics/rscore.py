"""R_score (docs/metrics.md): robustness of accuracy to a perturbation, in [0, 1].

Acc_di = |Acc_clean - Acc_noisy| in percentage points;
R_score = clamp((sqrt(m) - sqrt(Acc_di)) / (sqrt(m) - sqrt(t)), 0, 1), with tolerance t and
maximum m, 0 <= t < m <= 100 (defaults t = 0.05, m = 20). It is 1 when the drop is within
tolerance and 0 at or beyond m. t and m are stored next to every value.

One R_score per perturbation over all its levels (the second table of
:func:`rscore_tables`): the
R_score of the mean deterioration over the levels, the basic-question paper's single
R_score per basic-question dataset (R_score1 on the general one, R_score2 on the yes/no
one; docs/metrics.md says why the mean is taken before the score).

Both tables are the kernel :func:`rscore_arrays` over the observed accuracies; the
bootstrap (:mod:`vqarobust.metrics.intervals`) runs the same kernel over the resamples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from vqarobust.metrics.coverage import check_coverage
from vqarobust.metrics.grouping import columns_of, group_means, with_rows
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


@dataclass(frozen=True)
class RScoreArrays:
    """R_score in every replicate (row 0: the data). ``labels`` (model, perturbation,
    severity; perturbation ``all``: the mean noisy accuracy over the perturbations at that
    severity) index the columns of ``acc_clean``, ``acc_noisy``, ``acc_di`` and
    ``rscore``; ``overall_labels`` (model, perturbation, levels) those of
    ``overall_clean``, ``overall_di`` (the mean deterioration over the levels) and
    ``overall`` (its R_score)."""

    labels: pl.DataFrame
    acc_clean: np.ndarray
    acc_noisy: np.ndarray
    acc_di: np.ndarray
    rscore: np.ndarray
    overall_labels: pl.DataFrame
    overall_clean: np.ndarray
    overall_di: np.ndarray
    overall: np.ndarray


def _score(di: np.ndarray, tolerance: float, maximum: float) -> np.ndarray:
    """R_score of deteriorations ``di`` in percentage points."""
    sm, st = math.sqrt(maximum), math.sqrt(tolerance)
    return np.clip((sm - np.sqrt(di)) / (sm - st), 0.0, 1.0)


def rscore_arrays(
    acc: np.ndarray, rows: pl.DataFrame, tolerance: float, maximum: float
) -> RScoreArrays:
    """The R_score kernel: ``acc`` (replicates, rows) holds accuracies of the rows of
    ``rows`` (model, perturbation, severity, row -> column of ``acc``); a model's clean
    accuracy is the mean of its severity-0 rows, and models without one are left out."""
    clean_labels, clean = group_means(acc, rows.filter(pl.col("severity") == 0), ["model"])
    own = rows.filter(
        (pl.col("severity") > 0) & (pl.col("perturbation") != CLEAN),
        pl.col("model").is_in(clean_labels["model"].implode()),
    )
    per, per_v = group_means(acc, own, ["model", "perturbation", "severity"])
    every, every_v = group_means(acc, own, ["model", "severity"])
    labels = pl.concat(
        [per, every.with_columns(pl.lit("all").alias("perturbation")).select(per.columns)]
    )
    noisy = np.hstack([per_v, every_v])
    cl = columns_of(clean_labels, clean, labels["model"].to_list())
    di = np.abs(cl - noisy) * 100
    # One R_score per perturbation: of the mean deterioration over its levels.
    levels = with_rows(labels).filter(pl.col("perturbation") != "all")
    overall_labels, overall_di = group_means(di, levels, ["model", "perturbation"])
    counts = levels.group_by("model", "perturbation").agg(pl.len().cast(pl.Int64).alias("levels"))
    overall_labels = overall_labels.join(
        counts, on=["model", "perturbation"], how="left", maintain_order="left"
    )
    overall_clean = columns_of(clean_labels, clean, overall_labels["model"].to_list())
    return RScoreArrays(
        labels,
        cl,
        noisy,
        di,
        _score(di, tolerance, maximum),
        overall_labels,
        overall_clean,
        overall_di,
        _score(overall_di, tolerance, maximum),
    )


def rscore_tables(
    accuracy: pl.DataFrame,
    tolerance: float = DEFAULT_TOLERANCE,
    maximum: float = DEFAULT_MAXIMUM,
    on_missing: str = "error",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The R_score point tables: :func:`rscore_arrays` over the observed accuracies of
    ``accuracy`` (model, perturbation, severity, accuracy).

    First table: R_score per model x perturbation x severity, and per model x severity
    over all perturbations (group ``all``: mean noisy accuracy at that severity). Second:
    per model x perturbation, the mean deterioration over its levels (``acc_di``,
    percentage points), their number, and the R_score of that mean. Gaps are an error
    unless ``on_missing="drop"`` (:func:`vqarobust.metrics.coverage.check_coverage`)."""
    check_bounds(tolerance, maximum)
    accuracy = with_rows(check_coverage(accuracy, on_missing, "R_score"))
    r = rscore_arrays(accuracy["accuracy"].to_numpy()[None, :], accuracy, tolerance, maximum)
    bounds = (pl.lit(tolerance).alias("tolerance"), pl.lit(maximum).alias("maximum"))
    per_level = r.labels.with_columns(
        pl.Series("acc_clean", r.acc_clean[0]),
        pl.Series("acc_noisy", r.acc_noisy[0]),
        pl.Series("acc_di", r.acc_di[0]),
        pl.Series("rscore", r.rscore[0]),
        *bounds,
    ).sort("model", "perturbation", "severity")
    overall = r.overall_labels.with_columns(
        pl.Series("acc_clean", r.overall_clean[0], dtype=pl.Float64),
        pl.Series("acc_di", r.overall_di[0]),
        pl.Series("rscore", r.overall[0]),
        *bounds,
    ).sort("model", "perturbation")
    return per_level, overall

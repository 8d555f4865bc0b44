"""How level-controllable a basic-question ranker's noise is: does accuracy fall
monotonically as the level rises (level 1 = the most similar basic questions)?

Per perturbation x model: Spearman's rank correlation of level and accuracy (-1 = accuracy
falls with every level), the share of steps from one level to the next that do not raise
accuracy, and the accuracy lost from the first level to the last. Per perturbation: the
means over models; the most controllable ranker has the lowest mean correlation (ties: the
larger share of non-rising steps, then the name).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

LEVEL_SCHEMA = {
    "perturbation": pl.String,
    "model": pl.String,
    "levels": pl.Int64,
    "spearman": pl.Float64,
    "non_rising": pl.Float64,
    "first_to_last": pl.Float64,
}


def level_control(accuracy: pl.DataFrame) -> pl.DataFrame:
    """Per perturbation x model of ``accuracy`` (model, perturbation, severity, accuracy;
    severity = level >= 1): ``spearman``, ``non_rising`` and ``first_to_last``
    (accuracy at the first level minus at the last)."""
    rows = []
    levels = accuracy.filter(pl.col("severity") > 0).sort("perturbation", "model", "severity")
    for (pert, model), g in levels.group_by("perturbation", "model", maintain_order=True):
        acc = g["accuracy"].to_numpy()
        lev = g["severity"].to_numpy()
        rho = float("nan")
        if len(acc) > 1 and np.ptp(acc) > 0:
            rho = float(stats.spearmanr(lev, acc).statistic)
        steps = np.diff(acc)
        rows.append(
            {
                "perturbation": pert,
                "model": model,
                "levels": len(acc),
                "spearman": rho,
                "non_rising": float(np.mean(steps <= 0)) if len(steps) else float("nan"),
                "first_to_last": float(acc[0] - acc[-1]),
            }
        )
    return pl.DataFrame(rows, schema=LEVEL_SCHEMA)


def ranker_comparison(per_model: pl.DataFrame) -> pl.DataFrame:
    """Means over models of :func:`level_control` per perturbation, most controllable
    first (lowest mean Spearman; NaN, flat accuracy, last)."""
    return (
        per_model.group_by("perturbation")
        .agg(
            pl.col("model").n_unique().alias("models"),
            pl.col("spearman").fill_nan(None).mean().alias("spearman"),
            pl.col("non_rising").mean(),
            pl.col("first_to_last").mean(),
        )
        .sort(
            ["spearman", "non_rising", "perturbation"],
            descending=[False, True, False],
            nulls_last=True,
        )
    )

"""Means of replicate arrays over groups of table rows: the one aggregation every
statistic kernel is built from (docs/metrics.md, "Uncertainty").

A kernel takes ``values`` of shape (replicates, rows), where row 0 is the data as
observed and the other rows are bootstrap resamples, and a frame whose ``row`` column
points into the second axis. The point table of a statistic is its kernel over one
replicate (the observed accuracies); its interval is the same kernel over every
replicate, so the interval's estimate is the table's number by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from scipy import sparse


def with_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``row`` column numbering its rows (the columns of a one-replicate
    array made from one of its columns)."""
    return frame.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))


def group_means(
    values: np.ndarray, frame: pl.DataFrame, by: Sequence[str], per: str | None = None
) -> tuple[pl.DataFrame, np.ndarray]:
    """Means of replicate ``values`` (replicates, rows) over the rows of ``frame`` (which
    holds a ``row`` column into ``values``) per group ``by``: (labels sorted by ``by``,
    (R, G)).

    Plain means over the rows; with ``per`` (a column, e.g. ``perturbation``) a mean per
    value of ``per`` first and then over those values, so each weighs the same however
    many rows (severities) it has."""
    by = list(by)
    labels = frame.select(by).unique().sort(by).with_row_index("_g")
    f = frame.join(labels, on=by, how="left", nulls_equal=True)
    if per is None:
        f = f.with_columns(pl.len().over("_g").alias("_size"))
    else:
        f = f.with_columns(
            (pl.len().over("_g", per) * pl.col(per).n_unique().over("_g")).alias("_size")
        )
    member = sparse.csr_matrix(
        (1.0 / f["_size"].to_numpy(), (f["_g"].to_numpy(), f["row"].to_numpy())),
        shape=(labels.height, values.shape[1]),
    )
    return labels.drop("_g"), np.asarray(member @ values.T).T


def columns_of(labels: pl.DataFrame, values: np.ndarray, keys: Sequence[str]) -> np.ndarray:
    """Columns of ``values`` (one per row of ``labels``, which has a ``model`` column) in
    the order of the models ``keys`` (a model may repeat: one column per entry)."""
    pos = {m: i for i, m in enumerate(labels["model"].to_list())}
    return values[:, [pos[m] for m in keys]]

"""Accuracy per subset (model, modality, perturbation, severity) and per question or
answer type: the mean score of the subset's questions.

One kernel computes it, :meth:`vqarobust.metrics.uncertainty.ClusterSums.means` over the
per-question scores: the ``accuracy`` tables are that kernel at the observed data alone
(:data:`vqarobust.metrics.uncertainty.OBSERVED`) and their bootstrap intervals call it with
the run's resample weights, whose replicate 0 is the same number, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from vqarobust.metrics.uncertainty import (
    OBSERVED,
    ClusterSums,
    Encoding,
    cluster_sums,
    encode_keys,
    observed_sums,
)

SUBSET = ("model", "modality", "perturbation", "severity")
TYPES = ("question_type", "answer_type")


def type_codes(
    scored: pl.DataFrame, questions: pl.DataFrame, kind: str
) -> tuple[np.ndarray, pl.DataFrame]:
    """Per row of ``scored``, the index of its question's ``kind`` (a question or answer
    type; an empty type is a type of its own) among the sorted types, and those types."""
    names = questions.select(pl.col(kind).unique().sort(nulls_last=True))
    coded = questions.join(names.with_row_index("code"), on=kind, nulls_equal=True)
    ids = coded["question_id"].to_numpy()
    order = np.argsort(ids, kind="stable")
    asked = scored.get_column("question_id").to_numpy()
    pos = np.minimum(np.searchsorted(ids[order], asked), max(ids.size - 1, 0))
    if asked.size and (ids.size == 0 or not np.array_equal(ids[order][pos], asked)):
        missing = np.setdiff1d(asked, ids)
        raise ValueError(
            f"{missing.size} questions answered have no question row (e.g. {missing[:5].tolist()})"
        )
    return coded["code"].to_numpy().astype(np.int64)[order][pos], names


def typed_sums(
    scored: pl.DataFrame,
    questions: pl.DataFrame,
    kind: str,
    n_clusters: int | None = None,
    subsets: Encoding | None = None,
) -> ClusterSums:
    """Sums of the scores per subset and ``kind`` (labelled by the type's name); per
    cluster when ``scored`` carries a ``cluster`` column of ``n_clusters``, else the
    observed sums alone. ``subsets``: the rows' encoding by SUBSET, when already made."""
    codes, names = type_codes(scored, questions, kind)
    keys = (subsets or encode_keys(scored, SUBSET)).refine(codes, names)
    if n_clusters is None:
        return observed_sums(scored, keys, ["score"])
    return cluster_sums(scored, keys, ["score"], n_clusters)


def _table(sums: ClusterSums, *extra: pl.Series) -> pl.DataFrame:
    """The point table of per-key sums: ``n`` and ``accuracy`` (the kernel at the data)."""
    return sums.keys.with_columns(
        pl.Series("n", sums.n, pl.Int64),
        pl.Series("accuracy", sums.means("score", OBSERVED)[0], pl.Float64),
        *extra,
    ).sort(sums.keys.columns, nulls_last=True)


def accuracy_tables(scored: pl.DataFrame, questions: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """``accuracy`` per subset (``n`` questions, mean score, how many answers were
    ``truncated``) and ``question_type_accuracy`` and ``answer_type_accuracy`` (per subset
    and type: ``n``, ``accuracy``), from scored per-question predictions."""
    subsets = encode_keys(scored, SUBSET)
    # An unknown truncation (null) counts as not truncated, as SQL's FILTER counted it.
    flags = scored.with_columns(pl.col("truncated").fill_null(False))
    sums = observed_sums(flags, subsets, ["score", "truncated"])
    truncated = pl.Series("truncated", sums.totals("truncated", OBSERVED)[0]).cast(pl.Int64)
    tables = {"accuracy": _table(sums, truncated)}
    for kind in TYPES:
        tables[f"{kind}_accuracy"] = _table(typed_sums(scored, questions, kind, subsets=subsets))
    return tables


def accuracy_by(scored: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per distinct ``keys``: ``n`` questions and ``accuracy`` (mean ``score``)."""
    return _table(observed_sums(scored, keys, ["score"]))

"""Gaps in an accuracy table that would flatter a model, found before any metric is computed.

A model without clean rows has no reference to drop from; a model that lacks a
(perturbation, severity) another model has would be averaged over fewer, possibly easier
subsets (a perturbation with no rows at all would score a relative drop of 0). Both are an
error naming them, unless the caller asks ``on_missing="drop"``: then models without clean
rows are left out, and so is every perturbation some model lacks (for every model, so all
are compared on the same subsets), with a :class:`RobustnessWarning` naming what was
dropped (the workflow stores warnings in ``run_info`` and the report lists them).
Severities absent for every model (a config choice such as ``severities: [1, 3, 5]``) are
no gap.
"""

from __future__ import annotations

import warnings

import polars as pl

from vqarobust.metrics.robustness import CLEAN, RobustnessWarning

ON_MISSING = ("error", "drop")


class MissingRowsError(ValueError):
    """A model lacks clean rows or subsets that other models have."""


def find_gaps(accuracy: pl.DataFrame) -> tuple[list[str], pl.DataFrame]:
    """(models without a clean row, the missing (model, perturbation, severity) subsets of the
    models that have one)."""
    models = accuracy.select(pl.col("model").cast(pl.String)).unique()
    # A clean row, or (the VRE tables accept it) a severity-0 row of every perturbation.
    per = (
        accuracy.filter(pl.col("perturbation") != CLEAN)
        .group_by(pl.col("model").cast(pl.String))
        .agg(
            (
                pl.col("perturbation").filter(pl.col("severity") == 0).n_unique()
                == pl.col("perturbation").n_unique()
            ).alias("own")
        )
    )
    with_clean = pl.concat(
        [
            accuracy.filter((pl.col("perturbation") == CLEAN) & (pl.col("severity") == 0)).select(
                pl.col("model").cast(pl.String)
            ),
            per.filter(pl.col("own")).select("model"),
        ]
    ).unique()
    no_clean = sorted(models.join(with_clean, on="model", how="anti")["model"].to_list())
    cells = (
        accuracy.filter((pl.col("perturbation") != CLEAN) & (pl.col("severity") > 0))
        .select(pl.col("model").cast(pl.String), "perturbation", "severity")
        .unique()
    )
    wanted = cells.select("perturbation", "severity").unique().join(with_clean, how="cross")
    holes = wanted.join(cells, on=["model", "perturbation", "severity"], how="anti").sort(
        "model", "perturbation", "severity"
    )
    return no_clean, holes.select("model", "perturbation", "severity")


def check_coverage(
    accuracy: pl.DataFrame,
    on_missing: str = "error",
    what: str = "metrics",
) -> pl.DataFrame:
    """``accuracy`` (model, perturbation, severity, accuracy) when it has no gap; else raise
    :class:`MissingRowsError`, or with ``on_missing="drop"`` return it without the models
    and perturbations named in a warning. ``what`` names the caller in messages."""
    if on_missing not in ON_MISSING:
        raise ValueError(f"on_missing must be one of {ON_MISSING}, not {on_missing!r}")
    no_clean, holes = find_gaps(accuracy)
    if not no_clean and not holes.height:
        return accuracy
    problems = []
    if no_clean:
        problems.append(f"models without clean rows: {no_clean}")
    if holes.height:
        absent = holes.group_by("model", "perturbation").agg(pl.col("severity").sort())
        listed = [
            f"{m}/{c} (severities {s})"
            for m, c, s in absent.sort("model", "perturbation").head(10).iter_rows()
        ]
        problems.append(
            f"{holes.height} (model, perturbation, severity) subsets that other models have "
            f"are missing: {', '.join(listed)}{' ...' if absent.height > 10 else ''}"
        )
    message = f"{what}: " + "; ".join(problems)
    if on_missing == "error":
        raise MissingRowsError(
            message + ". Such gaps would flatter the models that have them; run the missing "
            "subsets, or pass on_missing='drop' to leave them out with a warning."
        )
    dropped = sorted(holes["perturbation"].unique().to_list())
    warnings.warn(
        f"{message}; dropped (on_missing='drop'): models {no_clean}, perturbations "
        f"{dropped} (for every model)",
        RobustnessWarning,
        stacklevel=2,
    )
    return accuracy.filter(
        ~pl.col("model").cast(pl.String).is_in(no_clean) & ~pl.col("perturbation").is_in(dropped)
    )


FIDELITY_DROP_SCHEMA = {"perturbation": pl.String, "severity": pl.Int64, "n_dropped": pl.Int64}


def fidelity_drops(question_sets: pl.DataFrame) -> tuple[pl.DataFrame, list[int]]:
    """Questions the fidelity filter dropped (``text.on_low_similarity: drop``; a null
    ``perturbed`` in a question set): their count per (perturbation, severity), zeros
    included for the sets the filter ran on, and the sorted ids dropped from any set.
    Every metric is computed over the other questions, which every set still holds, so
    clean and perturbed accuracies stay paired question by question."""
    filtered = question_sets.filter(
        pl.col("similarity").is_not_null() | pl.col("perturbed").is_null()
    )
    counts = (
        filtered.group_by("perturbation", "severity")
        .agg(pl.col("perturbed").is_null().sum().alias("n_dropped"))
        .cast(FIDELITY_DROP_SCHEMA)  # type: ignore[arg-type]
        .sort("perturbation", "severity")
    )
    ids = filtered.filter(pl.col("perturbed").is_null())["question_id"].unique().sort()
    return counts, ids.to_list()

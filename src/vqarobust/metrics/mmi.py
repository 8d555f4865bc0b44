"""MMI (MultiModal Impact, docs/metrics.md): relative drop of a score from clean to perturbed.

MMI = (s_clean - s_pert) / s_clean, where s_pert is the mean score over the perturbed
sets of the group summarized: per perturbation the mean over its severities, and for a
class or a whole modality the mean of those per-perturbation means (the multimodal
paper's "ave"), so a one-level perturbation weighs as much as a five-level one. Scope
``all_sets`` keeps the plain mean over every perturbed set (severity-weighted). Lower is
more robust; it works for any score where higher is better. A zero clean score gives
MMI 0 (no drop is measurable) with a warning.

The table is the kernel :func:`mmi_arrays` over the observed accuracies; the bootstrap
(:mod:`vqarobust.metrics.intervals`) runs the same kernel over the resamples.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from vqarobust.metrics.coverage import check_coverage
from vqarobust.metrics.grouping import columns_of, group_means, with_rows
from vqarobust.metrics.robustness import CLEAN, RobustnessWarning


def families_frame(families: Mapping[str, str] | None) -> pl.DataFrame:
    """A (perturbation, family) table from a name -> class mapping, for joins."""
    families = dict(families or {})
    return pl.DataFrame(
        {"perturbation": list(families), "family": list(families.values())},
        schema={"perturbation": pl.String, "family": pl.String},
    )


# The groups MMI is summarized over: each perturbation, each class, all perturbations
# (each weighing the same), and all perturbed sets (each weighing the same).
SCOPES = ("perturbation", "family", "all", "all_sets")


def ratio_drop(clean: np.ndarray, perturbed: np.ndarray) -> np.ndarray:
    """(clean - perturbed) / clean; 0 where clean is 0 (no drop is measurable)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(clean > 0, (clean - perturbed) / np.where(clean > 0, clean, 1.0), 0.0)


@dataclass(frozen=True)
class MMIArrays:
    """MMI in every replicate (row 0: the data): per scope of :data:`SCOPES`, the labels
    (model, group) and the perturbed accuracy (replicates, groups); each model's clean
    accuracy (``clean_labels``: model)."""

    clean_labels: pl.DataFrame
    clean: np.ndarray
    perturbed: dict[str, tuple[pl.DataFrame, np.ndarray]]

    def clean_of(self, labels: pl.DataFrame) -> np.ndarray:
        """The clean accuracy of each row's model in ``labels``."""
        return columns_of(self.clean_labels, self.clean, labels["model"].to_list())

    def mmi(self, scope: str) -> np.ndarray:
        """MMI of every group of ``scope``, in the order of its labels."""
        labels, perturbed = self.perturbed[scope]
        return ratio_drop(self.clean_of(labels), perturbed)


def mmi_arrays(
    acc: np.ndarray, rows: pl.DataFrame, families: Mapping[str, str] | None = None
) -> MMIArrays:
    """The MMI kernel: ``acc`` (replicates, rows) holds accuracies of the rows of ``rows``
    (model, perturbation, severity, row -> column of ``acc``); a model's clean accuracy is
    the mean of its severity-0 rows, and models without one are left out. A perturbation
    outside ``families`` is of class ``unknown``."""
    clean_labels, clean = group_means(acc, rows.filter(pl.col("severity") == 0), ["model"])
    own = rows.filter(
        (pl.col("severity") > 0) & (pl.col("perturbation") != CLEAN),
        pl.col("model").is_in(clean_labels["model"].implode()),
    )
    own = own.join(families_frame(families), on="perturbation", how="left").with_columns(
        pl.col("family").fill_null("unknown")
    )
    perturbed = {}
    for scope in SCOPES:
        group = pl.col(scope) if scope in ("perturbation", "family") else pl.lit(scope)
        per = None if scope == "all_sets" else "perturbation"
        perturbed[scope] = group_means(
            acc, own.with_columns(group.alias("group")), ["model", "group"], per
        )
    return MMIArrays(clean_labels, clean, perturbed)


def mmi_table(
    accuracy: pl.DataFrame,
    families: Mapping[str, str] | None = None,
    on_missing: str = "error",
) -> pl.DataFrame:
    """MMI per model x perturbation, per model x perturbation class and per model overall:
    :func:`mmi_arrays` over the observed accuracies.

    ``accuracy`` is the long table (model, perturbation, severity, accuracy) with clean
    rows (severity 0). Columns: model, scope (perturbation | family | all | all_sets),
    group, clean, perturbed, mmi; ``perturbed`` of a family and of ``all`` is the mean of
    the per-perturbation means, of ``all_sets`` the mean over every perturbed set. Gaps (a
    model without clean rows, or lacking a subset another model has) are an error unless
    ``on_missing="drop"`` (:func:`vqarobust.metrics.coverage.check_coverage`).
    """
    accuracy = with_rows(check_coverage(accuracy, on_missing, "MMI"))
    m = mmi_arrays(accuracy["accuracy"].to_numpy()[None, :], accuracy, families)
    zero = m.clean_labels.filter(pl.Series(m.clean[0] == 0))
    if zero.height:
        warnings.warn(
            f"MMI: clean score 0 for {sorted(zero['model'])}; MMI set to 0",
            RobustnessWarning,
            stacklevel=2,
        )
    parts = [
        labels.with_columns(
            pl.lit(scope).alias("scope"),
            pl.Series("clean", m.clean_of(labels)[0]),
            pl.Series("perturbed", perturbed[0]),
            pl.Series("mmi", m.mmi(scope)[0]),
        )
        for scope, (labels, perturbed) in m.perturbed.items()
    ]
    return (
        pl.concat(parts)
        .select("model", "scope", "group", "clean", "perturbed", "mmi")
        .sort("model", "scope", "group")
    )

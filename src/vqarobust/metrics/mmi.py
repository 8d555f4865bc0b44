"""MMI (MultiModal Impact, docs/metrics.md): relative drop of a score from clean to perturbed.

MMI = (s_clean - s_pert) / s_clean, where s_pert is the mean score over the perturbed
sets of the group summarized: per perturbation the mean over its severities, and for a
class or a whole modality the mean of those per-perturbation means (the multimodal
paper's "ave"), so a one-level perturbation weighs as much as a five-level one. Scope
``all_sets`` keeps the plain mean over every perturbed set (severity-weighted). Lower is
more robust; it works for any score where higher is better. A zero clean score gives
MMI 0 (no drop is measurable) with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import polars as pl

from vqarobust.metrics.coverage import check_coverage
from vqarobust.metrics.robustness import CLEAN, RobustnessWarning


def families_frame(families: Mapping[str, str] | None) -> pl.DataFrame:
    """A (corruption, family) table from a name -> class mapping, for joins."""
    families = dict(families or {})
    return pl.DataFrame(
        {"corruption": list(families), "family": list(families.values())},
        schema={"corruption": pl.String, "family": pl.String},
    )


def mmi_table(
    accuracy: pl.DataFrame,
    families: Mapping[str, str] | None = None,
    on_missing: str = "error",
) -> pl.DataFrame:
    """MMI per model x corruption, per model x corruption class and per model overall.

    ``accuracy`` is the long table (model, corruption, severity, accuracy) with clean
    rows (severity 0). Columns: model, scope (corruption | family | all | all_sets),
    group, clean, perturbed, mmi; ``perturbed`` of a family and of ``all`` is the mean of
    the per-corruption means, of ``all_sets`` the mean over every perturbed set. Gaps (a
    model without clean rows, or lacking a subset another model has) are an error unless
    ``on_missing="drop"`` (:func:`vqarobust.metrics.coverage.check_coverage`).
    """
    accuracy = check_coverage(accuracy, on_missing, "MMI")
    clean = (
        accuracy.filter(pl.col("severity") == 0)
        .group_by("model")
        .agg(pl.col("accuracy").mean().alias("clean"))
    )
    pert = accuracy.filter((pl.col("severity") > 0) & (pl.col("corruption") != CLEAN))
    fam = families_frame(families)
    pert = pert.join(fam, on="corruption", how="left").with_columns(
        pl.col("family").fill_null("unknown")
    )
    per_corruption = pert.group_by("model", "corruption", "family").agg(pl.col("accuracy").mean())
    parts = [
        pert.group_by("model")
        .agg(pl.col("accuracy").mean().alias("perturbed"))
        .with_columns(pl.lit("all_sets").alias("group"), pl.lit("all_sets").alias("scope"))
        .select("model", "group", "perturbed", "scope")
    ]
    for scope, key in (("corruption", "corruption"), ("family", "family"), ("all", None)):
        group = pl.col(key) if key else pl.lit("all")
        parts.append(
            per_corruption.group_by("model", group.alias("group"))
            .agg(pl.col("accuracy").mean().alias("perturbed"))
            .with_columns(pl.lit(scope).alias("scope"))
            .select("model", "group", "perturbed", "scope")
        )
    out = pl.concat(parts).join(clean, on="model", how="inner")
    zero = out.filter(pl.col("clean") == 0)
    if zero.height:
        warnings.warn(
            f"MMI: clean score 0 for {sorted(set(zero['model']))}; MMI set to 0",
            RobustnessWarning,
            stacklevel=2,
        )
    mmi = (
        pl.when(pl.col("clean") > 0)
        .then((pl.col("clean") - pl.col("perturbed")) / pl.col("clean"))
        .otherwise(0.0)
    )
    return (
        out.with_columns(mmi.alias("mmi"))
        .select("model", "scope", "group", "clean", "perturbed", "mmi")
        .sort("model", "scope", "group")
    )

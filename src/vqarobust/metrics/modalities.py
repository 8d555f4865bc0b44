"""Metric tables over every modality of the one perturbation axis.

The long accuracy table holds (model, modality, perturbation, severity, accuracy); clean
rows are modality ``clean``. The VRE suite (5 severities) runs per modality for ``image``
and ``text``; basic-question noise has 7 levels and gets R_score and MMI. MMI is also
compared across modalities (scope ``modality``: image, text, basic_question, and ``all``
= image and text together). The metric kernels see one modality at a time.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from vqarobust.metrics.mmi import families_frame, mmi_table
from vqarobust.metrics.robustness import CLEAN, robustness_tables
from vqarobust.metrics.rscore import DEFAULT_MAXIMUM, DEFAULT_TOLERANCE, rscore_tables

VRE_MODALITIES = ("image", "text")
MMI_ALL = ("image", "text")
# Perturbations of these families have one level: in MMI and R_score, not in VRE.
SINGLE_LEVEL_FAMILIES = ("sentence",)


def modality_accuracy(accuracy: pl.DataFrame, modalities: tuple[str, ...]) -> pl.DataFrame:
    """Clean rows and the rows of ``modalities`` as (model, perturbation, severity, accuracy)."""
    return accuracy.filter(pl.col("modality").is_in([CLEAN, *modalities])).select(
        "model", "perturbation", "severity", "accuracy"
    )


def _with_modality(df: pl.DataFrame, modality: str) -> pl.DataFrame:
    """``df`` with a ``modality`` column after ``model`` (first when it has none)."""
    first = ["model", "modality"] if "model" in df.columns else ["modality"]
    return df.with_columns(pl.lit(modality).alias("modality")).select(*first, pl.exclude(*first))


def modality_tables(
    accuracy: pl.DataFrame,
    weights: Mapping[str, float] | None = None,
    families: Mapping[str, str] | None = None,
    rscore_tolerance: float = DEFAULT_TOLERANCE,
    rscore_maximum: float = DEFAULT_MAXIMUM,
    on_missing: str = "error",
) -> dict[str, pl.DataFrame]:
    """``submetrics``, ``vre_model``, ``vre_perturbation``, ``vre_family``, ``vre_sweep``,
    ``mmi``, ``rscore`` and ``rscore_overall``, each with a ``modality`` column
    (``perturbation`` where it names one).

    ``on_missing`` says what a gap is (:func:`vqarobust.metrics.coverage.check_coverage`):
    an error (default), or ``drop`` (with a warning naming what was left out)."""
    present = [m for m in accuracy["modality"].unique().to_list() if m != CLEAN]
    fam = families_frame(families)
    parts: dict[str, list[pl.DataFrame]] = {
        k: []
        for k in (
            "submetrics",
            "vre_model",
            "vre_perturbation",
            "vre_family",
            "vre_sweep",
            "mmi",
            "rscore",
            "rscore_overall",
        )
    }
    for modality in sorted(present):
        table = modality_accuracy(accuracy, (modality,))
        single = [p for p, f in (families or {}).items() if f in SINGLE_LEVEL_FAMILIES]
        graded = table.filter(~pl.col("perturbation").is_in(single))
        if modality in VRE_MODALITIES and graded.filter(pl.col("severity") > 0).height:
            t = robustness_tables(graded, weights, on_missing, families or {})
            parts["submetrics"].append(
                _with_modality(t.submetrics, modality).join(fam, on="perturbation", how="left")
            )
            parts["vre_model"].append(_with_modality(t.vre_model, modality))
            if t.vre_family is not None:
                parts["vre_family"].append(_with_modality(t.vre_family, modality))
            parts["vre_perturbation"].append(
                _with_modality(t.vre_perturbation, modality).join(
                    fam, on="perturbation", how="left"
                )
            )
            parts["vre_sweep"].append(
                t.vre_sweep.with_columns(pl.lit(modality).alias("modality")).select(
                    "modality", pl.exclude("modality")
                )
            )
        parts["mmi"].append(_with_modality(mmi_table(table, families, on_missing), modality))
        rscore, overall = rscore_tables(table, rscore_tolerance, rscore_maximum, on_missing)
        parts["rscore"].append(_with_modality(rscore, modality))
        parts["rscore_overall"].append(_with_modality(overall, modality))
    # Across modalities: MMI of each modality as a whole, and of image and text together.
    whole = [
        df.filter(pl.col("scope") == "all").with_columns(
            pl.col("modality").alias("group"), pl.lit("modality").alias("scope")
        )
        for df in parts["mmi"]
    ]
    both = [m for m in MMI_ALL if m in present]
    if len(both) == len(MMI_ALL):
        # Each perturbation of either side weighs the same; names are kept apart by side.
        sides = accuracy.filter(pl.col("modality").is_in([CLEAN, *MMI_ALL])).select(
            "model",
            pl.when(pl.col("modality") == CLEAN)
            .then(pl.col("perturbation"))
            .otherwise(pl.concat_str("modality", "perturbation", separator="/"))
            .alias("perturbation"),
            "severity",
            "accuracy",
        )
        combined = mmi_table(sides, None, on_missing)
        whole.append(
            _with_modality(combined.filter(pl.col("scope") == "all"), "all").with_columns(
                pl.lit("modality").alias("scope")
            )
        )
    parts["mmi"] += [w.with_columns(pl.lit("all").alias("modality")) for w in whole]
    out: dict[str, pl.DataFrame] = {}
    for name, frames in parts.items():
        if not frames:
            raise ValueError("no image or text perturbation rows: the VRE suite needs one")
        out[name] = pl.concat(frames, how="diagonal_relaxed")
    out["mmi"] = out["mmi"].sort("model", "modality", "scope", "group")
    return out

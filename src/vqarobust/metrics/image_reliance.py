"""Image reliance (the blank control, docs/metrics.md): a model's accuracy without the
image over its clean accuracy.

One kernel, :func:`reliance_ratio`, over replicate arrays of accuracies: the
``image_reliance`` table is that kernel at the observed accuracies and the bootstrap
calls it in every resample.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

# A model whose accuracy without the image (blank control) reaches this share of its clean
# accuracy uses the image little; the report says so next to its robustness numbers.
IMAGE_RELIANCE_RATIO = 0.8


def reliance_ratio(control: np.ndarray, clean: np.ndarray) -> np.ndarray:
    """Control accuracy over clean accuracy, elementwise (replicates, ...); NaN where the
    clean accuracy is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(clean > 0, control / np.where(clean > 0, clean, 1.0), np.nan)


def image_reliance(accuracy: pl.DataFrame, controls: Sequence[str]) -> pl.DataFrame:
    """Per model and control: clean accuracy, accuracy on the control (without the
    image), their ratio (:func:`reliance_ratio`, null where the clean accuracy is 0) and
    whether the model ``uses_image_little`` (ratio at least ``IMAGE_RELIANCE_RATIO``)."""
    clean = accuracy.filter(pl.col("severity") == 0).select(
        "model", pl.col("accuracy").alias("clean_accuracy")
    )
    blank = accuracy.filter(pl.col("perturbation").is_in(list(controls))).select(
        "model",
        pl.col("perturbation").alias("control"),
        pl.col("accuracy").alias("control_accuracy"),
    )
    both = clean.join(blank, on="model")
    ratio = reliance_ratio(
        both["control_accuracy"].to_numpy()[None, :], both["clean_accuracy"].to_numpy()[None, :]
    )[0]
    return (
        both.with_columns(pl.Series("ratio", ratio, pl.Float64).fill_nan(None))
        .with_columns(
            (pl.col("ratio") >= IMAGE_RELIANCE_RATIO).fill_null(False).alias("uses_image_little")
        )
        .sort("model", "control")
    )

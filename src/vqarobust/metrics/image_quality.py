"""Severity calibration (docs/metrics.md, "Image quality"): SSIM and PSNR (and, with
``lpips`` set, LPIPS) of every corrupted image against its clean image, their means per
corruption x severity, and per model the rank correlation between a subset's mean SSIM
and its accuracy.

The multimodal-robustness paper checks with such scores (its Table 9) that a severity
step means something; the visual-robustness paper's corruptions come from ImageNet-C,
whose steps were calibrated on other images. Scores are computed by
:func:`vqarobust.corruptions.quality.ssim_psnr` inside the job that corrupts the images
(``corrupt_images``), on the image as stored, and kept as two columns of the subset's
shards.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np
import polars as pl

from vqarobust import store
from vqarobust.metrics.uncertainty import Settings, mean_intervals

QUALITY_SCHEMA = {
    "perturbation": pl.String,
    "severity": pl.Int64,
    "image_id": pl.Int64,
    "ssim": pl.Float64,
    "psnr": pl.Float64,
}
CORRELATION_SCHEMA = {
    "model": pl.String,
    "n_subsets": pl.Int64,
    "spearman": pl.Float64,
    "p_value": pl.Float64,
}


# The image_quality table's columns: each mean beside its interval, then the deviation.
QUALITY_COLUMNS = [
    "perturbation",
    "severity",
    "n_images",
    "ssim_mean",
    "ssim_low",
    "ssim_high",
    "ssim_std",
    "psnr_mean",
    "psnr_low",
    "psnr_high",
    "psnr_std",
    "n_identical",
]


LPIPS_COLUMNS = ["lpips_mean", "lpips_low", "lpips_high", "lpips_std"]


def quality_table(per_image: pl.DataFrame, uncertainty: Settings | None = None) -> pl.DataFrame:
    """Per (perturbation, severity): n_images, ssim_mean, ssim_std, psnr_mean, psnr_std
    and n_identical (images equal to their clean image, PSNR +inf: left out of the PSNR
    mean and deviation, which are null when every image is identical), and the bootstrap
    interval of each mean over the images (``ssim_low``, ``ssim_high``, ``psnr_low``,
    ``psnr_high``; :func:`vqarobust.metrics.uncertainty.mean_intervals` with the run's
    ``uncertainty`` settings). With an ``lpips`` column (the run computed LPIPS), also
    ``lpips_mean``, its interval and ``lpips_std``."""
    settings = uncertainty or Settings()
    keys = ["perturbation", "severity"]
    ssim = mean_intervals(per_image, keys, ["ssim"], "image_id", settings)
    psnr = mean_intervals(
        per_image.filter(pl.col("psnr").is_finite()), keys, ["psnr"], "image_id", settings
    )
    joined = _point_quality(per_image).join(ssim, on=keys, how="left")
    out = joined.join(psnr, on=keys, how="left").select(QUALITY_COLUMNS)
    if "lpips" not in per_image.columns:
        return out
    scored = per_image.filter(pl.col("lpips").is_not_null())
    lpips = mean_intervals(scored, keys, ["lpips"], "image_id", settings).join(
        scored.group_by(keys).agg(
            pl.col("lpips").mean().alias("lpips_mean"), pl.col("lpips").std().alias("lpips_std")
        ),
        on=keys,
        how="left",
    )
    return out.join(lpips.select(*keys, *LPIPS_COLUMNS), on=keys, how="left")


def _point_quality(per_image: pl.DataFrame) -> pl.DataFrame:
    finite = pl.col("psnr").filter(pl.col("psnr").is_finite())
    return (
        per_image.group_by("perturbation", "severity")
        .agg(
            pl.len().alias("n_images"),
            pl.col("ssim").mean().alias("ssim_mean"),
            pl.col("ssim").std().alias("ssim_std"),
            finite.mean().alias("psnr_mean"),
            finite.std().alias("psnr_std"),
            pl.col("psnr").is_infinite().sum().cast(pl.Int64).alias("n_identical"),
        )
        .sort("perturbation", "severity")
    )


def quality_correlation(
    quality: pl.DataFrame, accuracy: pl.DataFrame, perturbations: Sequence[str] | None = None
) -> pl.DataFrame:
    """Per model, Spearman's rank correlation between a corrupted subset's mean SSIM
    (``quality``, from :func:`quality_table`) and the model's accuracy on it
    (``accuracy``: model, modality, perturbation, severity, accuracy), over every image
    subset both hold (``perturbations`` restricts them). A correlation near +1 says the
    subsets that look most like the clean images are the easiest for that model; a
    severity step that changes SSIM little but accuracy much (or the reverse) pulls it
    down. Null with fewer than three subsets or a constant column."""
    acc = accuracy.filter(pl.col("modality") == "image", pl.col("severity") > 0)
    if perturbations is not None:
        acc = acc.filter(pl.col("perturbation").is_in(list(perturbations)))
    joined = acc.join(
        quality.select("perturbation", "severity", "ssim_mean"),
        on=["perturbation", "severity"],
        how="inner",
    )
    from scipy.stats import spearmanr  # a second to import: only where it is needed

    rows = []
    for (model,), part in joined.sort("perturbation", "severity").group_by(
        "model", maintain_order=True
    ):
        x, y = part["ssim_mean"].to_numpy(), part["accuracy"].to_numpy()
        rho = p = None
        if part.height >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
            result = spearmanr(x, y)
            rho, p = float(result.statistic), float(result.pvalue)
        rows.append({"model": model, "n_subsets": part.height, "spearman": rho, "p_value": p})
    return pl.DataFrame(rows, schema=CORRELATION_SCHEMA).sort("model")


def with_lpips(per_image: pl.DataFrame, paths: Sequence[str | os.PathLike[str]]) -> pl.DataFrame:
    """``per_image`` (QUALITY_SCHEMA) with each image's ``lpips`` from the LPIPS tables
    at ``paths`` (``score_lpips``: perturbation, severity, image_id, lpips); unchanged
    without them. A scored subset's image that has no LPIPS row is an error."""
    if not paths:
        return per_image
    keys = ["perturbation", "severity", "image_id"]
    # Each cast on its own: a table written before severities were int16 is int8.
    lpips = pl.concat(
        [pl.read_parquet(p).with_columns(pl.col("severity").cast(pl.Int64)) for p in paths]
    )
    out = per_image.join(lpips, on=keys, how="left")
    unmatched = lpips.join(per_image, on=keys, how="anti")
    if unmatched.height:
        # E.g. a subset whose shards carry no SSIM (read_quality warns): not silently gone.
        example = unmatched.select(keys).head(3).rows()
        warnings.warn(
            f"{unmatched.height} LPIPS rows have no image quality row and are left "
            f"out, e.g. {example}",
            stacklevel=2,
        )
    scored = lpips.select("perturbation", "severity").unique()
    missing = out.join(scored, on=["perturbation", "severity"], how="semi").filter(
        pl.col("lpips").is_null()
    )
    if missing.height:
        raise ValueError(
            f"{missing.height} images of LPIPS-scored subsets have no LPIPS, e.g. "
            f"{missing.select(keys).head(3).rows()}"
        )
    return out


def read_quality(subsets: Sequence[tuple[str, int, str | os.PathLike[str]]]) -> pl.DataFrame:
    """Per-image scores (QUALITY_SCHEMA) of the corrupted subsets among (perturbation,
    severity, image folder); clean folders (severity 0) are skipped. Subsets whose shards
    carry no scores (written before they were computed) are left out with a warning
    naming them."""
    parts, unscored = [], []
    for perturbation, severity, folder in subsets:
        if int(severity) == 0:
            continue
        table = store.read_image_quality(folder)
        if table is None:
            unscored.append(f"{perturbation}/{severity}")
            continue
        parts.append(
            pl.from_arrow(table).select(
                pl.lit(perturbation).alias("perturbation"),
                pl.lit(int(severity)).alias("severity"),
                "image_id",
                "ssim",
                "psnr",
            )
        )
    if unscored:
        warnings.warn(
            f"no image quality scores in {len(unscored)} image subsets (written before "
            f"they were computed; regenerate them to get SSIM and PSNR): "
            f"{', '.join(unscored[:10])}{' ...' if len(unscored) > 10 else ''}",
            stacklevel=2,
        )
    frame = pl.concat(parts) if parts else pl.DataFrame(schema=QUALITY_SCHEMA)
    return frame.cast(QUALITY_SCHEMA).sort("perturbation", "severity", "image_id")  # type: ignore[arg-type]

"""The "Severity calibration" section: SSIM and PSNR of every corrupted image against its
clean image, per corruption x severity, and their rank correlation with accuracy."""

from __future__ import annotations

from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.report import figures as fig
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import table_names


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """``quality`` (per corruption x severity, long), ``ssim_grid`` (perturbation x severity
    of mean SSIM with its interval over the images), ``quality_accuracy`` (each subset's
    accuracy per model) and ``image_quality_correlation``; empty without quality scores."""
    del run
    if "image_quality" not in table_names(con):  # written before quality scores
        return {}
    quality = con.sql("SELECT * FROM image_quality ORDER BY ALL").pl()
    if quality.is_empty():
        return {}
    grid = con.sql(
        """PIVOT (SELECT perturbation, severity,
                         CASE WHEN ssim_low IS NULL THEN printf('%.3f', ssim_mean)
                              ELSE printf('%.3f [%.3f, %.3f]', ssim_mean, ssim_low, ssim_high)
                         END AS ssim
                  FROM image_quality)
           ON severity USING first(ssim) ORDER BY perturbation"""
    ).pl()
    grid = grid.rename({c: f"SSIM {c}" for c in grid.columns if c != "perturbation"})
    return {
        "quality": quality,
        "ssim_grid": grid,
        "quality_accuracy": con.sql(
            """SELECT a.model, a.perturbation, a.severity, a.accuracy FROM accuracy a
               JOIN image_quality q USING (perturbation, severity)
               WHERE a.modality = 'image'"""
        ).pl(),
        "image_quality_correlation": con.sql(
            "SELECT * FROM image_quality_correlation ORDER BY model"
        ).pl(),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """``image_quality.csv`` and ``image_quality_correlation.csv`` (empty without scores)."""
    return {
        "image_quality": data.get("quality", pl.DataFrame()),
        "image_quality_correlation": data.get("image_quality_correlation", pl.DataFrame()),
    }


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """SSIM and accuracy per corruption and severity."""
    if not data:
        return {"image_quality": fig.placeholder("No image quality scores in this database.")}
    return {
        "image_quality": fig.image_quality(data["quality"], data["quality_accuracy"], run.families)
    }


def context(data: Data, run: Run) -> dict[str, Any] | None:
    """The grid, the long table and the correlation; None without quality scores."""
    del run
    if not data:
        return None
    return {
        "n_identical": int(data["quality"]["n_identical"].sum()),
        "ssim_grid": data["ssim_grid"],
        "quality": data["quality"],
        "correlation": data["image_quality_correlation"],
    }


SECTION = Section("calibration", ("image_quality",), context, read, figures, tables)

"""Figures of the report, each a function from a polars table to a matplotlib Figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def heatmap(df: pl.DataFrame, value: str, title: str, cmap: str = "Reds") -> Figure:
    """A model x corruption heatmap of ``value`` with the numbers written in each cell."""
    models = sorted(df["model"].unique().to_list())
    corruptions = sorted(df["corruption"].unique().to_list())
    grid = np.full((len(models), len(corruptions)), np.nan)
    for m, c, v in df.select("model", "corruption", value).iter_rows():
        grid[models.index(m), corruptions.index(c)] = v
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(corruptions), 1.4 + 0.5 * len(models)))
    im = ax.imshow(grid, cmap=cmap, aspect="auto")
    ax.set_xticks(range(len(corruptions)), corruptions, rotation=45, ha="right")
    ax.set_yticks(range(len(models)), models)
    finite = grid[np.isfinite(grid)]
    mid = (finite.max() + finite.min()) / 2 if finite.size else 0
    for i in range(len(models)):
        for j in range(len(corruptions)):
            if np.isfinite(grid[i, j]):
                colour = "white" if grid[i, j] > mid else "black"
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7, c=colour)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    return fig


def error_vs_severity(accuracy: pl.DataFrame) -> Figure:
    """Error (1 - accuracy) against severity, one panel per model, one line per corruption.

    Severity 0 is the clean error, shared by every line of a model.
    """
    models = sorted(accuracy["model"].unique().to_list())
    corruptions = sorted(c for c in accuracy["corruption"].unique().to_list() if c != "clean")
    fig, axes = plt.subplots(
        1, len(models), figsize=(4.2 * len(models), 3.6), squeeze=False, sharey=True
    )
    cmap = plt.get_cmap("tab20")
    for ax, model in zip(axes[0], models, strict=True):
        rows = accuracy.filter(pl.col("model") == model)
        clean = rows.filter(pl.col("corruption") == "clean")["accuracy"]
        for k, corruption in enumerate(corruptions):
            r = rows.filter(pl.col("corruption") == corruption).sort("severity")
            sev = r["severity"].to_list()
            err = (1 - r["accuracy"]).to_list()
            if clean.len():
                sev, err = [0, *sev], [1 - clean[0], *err]
            ax.plot(sev, err, marker="o", ms=3, lw=1.2, color=cmap(k % 20), label=corruption)
        ax.set_title(model)
        ax.set_xlabel("severity")
        ax.set_xticks(range(6))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("error (1 - accuracy)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    return fig

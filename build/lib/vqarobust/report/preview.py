"""A corruption x severity grid of one image, to see what each corruption does."""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from vqarobust import corruptions, store  # noqa: E402


def preview_grid(
    image: np.ndarray,
    names: Sequence[str] | None = None,
    seed: int = 0,
    cell_inches: float = 1.4,
):
    """A matplotlib Figure: one row per corruption, columns clean and severities 1..5."""
    names = list(names or corruptions.names(benchmark=True))
    image = corruptions.to_rgb(image)
    fig, axes = plt.subplots(
        len(names), 6, figsize=(6 * cell_inches, len(names) * cell_inches), squeeze=False
    )
    for r, name in enumerate(names):
        top = corruptions.max_severity(name)
        for s in range(6):
            ax = axes[r][s]
            ax.set_xticks([])
            ax.set_yticks([])
            if s <= top:
                ax.imshow(corruptions.corrupt(image, name, s, seed=seed))
            else:
                ax.axis("off")
            if r == 0:
                ax.set_title("clean" if s == 0 else f"severity {s}", fontsize=8)
        axes[r][0].set_ylabel(name, fontsize=8, rotation=0, ha="right", va="center")
    fig.tight_layout()
    return fig


def write_preview(
    image_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    names: Sequence[str] | None = None,
    seed: int = 0,
) -> None:
    """Read an image file and write its corruption grid as PNG (atomically)."""
    with Image.open(image_path) as im:
        image = np.asarray(im.convert("RGB"))
    fig = preview_grid(image, names, seed)
    with store.atomic_path(out_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)

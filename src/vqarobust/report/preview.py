"""A corruption x severity grid of one image, to see what each corruption does."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vqarobust import corruptions, store
from vqarobust.corruptions.stylize import Stylizer

GAP = 2  # pixels between cells
LABEL_WIDTH = 130  # row labels (corruption names)
HEADER_HEIGHT = 18  # column labels (clean, severity 1..5)


def preview_grid(
    image: np.ndarray,
    names: Sequence[str] | None = None,
    seed: int = 0,
    cell: int = 160,
    stylizer: Stylizer | None = None,
) -> Image.Image:
    """An RGB image: one row per corruption, labelled on the left; columns clean and
    severities 1..5, labelled on top; cells ``cell`` pixels on their longer side, tight.
    ``stylizer`` serves the stylize corruption."""
    names = list(names or corruptions.names(benchmark=True))
    image = corruptions.to_rgb(image)
    h, w = image.shape[:2]
    scale = cell / max(h, w)
    cw, ch = max(1, round(w * scale)), max(1, round(h * scale))
    grid = Image.new(
        "RGB",
        (LABEL_WIDTH + 6 * (cw + GAP), HEADER_HEIGHT + len(names) * (ch + GAP)),
        "white",
    )
    draw = ImageDraw.Draw(grid)
    font = ImageFont.load_default()
    for s in range(6):
        label = "clean" if s == 0 else f"severity {s}"
        draw.text((LABEL_WIDTH + s * (cw + GAP) + 2, 3), label, fill="black", font=font)
    for r, name in enumerate(names):
        top = HEADER_HEIGHT + r * (ch + GAP)
        draw.text((4, top + ch // 2 - 6), name, fill="black", font=font)
        for s in range(min(corruptions.max_severity(name), 5) + 1):
            context = {"stylizer": stylizer} if name == "stylize" else {}
            out = corruptions.corrupt(image, name, s, seed=seed, **context)
            thumb = Image.fromarray(out).resize((cw, ch), Image.Resampling.LANCZOS)
            grid.paste(thumb, (LABEL_WIDTH + s * (cw + GAP), top))
    return grid


def write_preview(
    image_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    names: Sequence[str] | None = None,
    seed: int = 0,
    stylize: Mapping[str, str] | None = None,
) -> None:
    """Read an image file and write its corruption grid as an RGB PNG (atomically).

    ``stylize`` (``weights`` and ``styles`` folders) is needed when ``names`` has stylize.
    """
    with Image.open(image_path) as im:
        image = np.asarray(im.convert("RGB"))
    stylizer = Stylizer(**stylize) if stylize and "stylize" in (names or []) else None
    grid = preview_grid(image, names, seed, stylizer=stylizer)
    with store.atomic_path(out_path) as tmp:
        grid.save(tmp, format="PNG")

"""Occlusion: part of the image hidden, at five area fractions, in one square (cutout)
or in many small ones (random patches).

Positions and fills are drawn from the item's ``rng``. A cutout is black (as in Cutout,
DeVries & Taylor 2017); patches take a random grey each, so that their edges, not only
their darkness, are what a model sees. Patches may overlap, so the hidden share of the
image is at most ``AREA[severity - 1]``; a cutout hides exactly that share up to
rounding its side to whole pixels.
"""

from __future__ import annotations

import numpy as np

from vqarobust.corruptions.registry import CORRUPTIONS

AREA = (0.05, 0.1, 0.2, 0.3, 0.4)  # share of the image hidden
PATCHES = 16


def _square(h: int, w: int, area: float, at_most: bool = False) -> tuple[int, int]:
    """Height and width of a square of ``area`` x h x w pixels (its side rounded, or
    rounded down with ``at_most``) that fits the image."""
    side = float(np.sqrt(area * h * w))
    side = max(1, int(side) if at_most else round(side))
    return min(side, h), min(side, w)


@CORRUPTIONS.register(family="occlusion")
def cutout(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """One black square of ``AREA`` of the image at a uniformly drawn position inside it."""
    h, w = image.shape[:2]
    sh, sw = _square(h, w, AREA[severity - 1])
    y, x = int(rng.integers(0, h - sh + 1)), int(rng.integers(0, w - sw + 1))
    out = image.copy()
    out[y : y + sh, x : x + sw] = 0
    return out


@CORRUPTIONS.register(family="occlusion")
def random_patches(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """``PATCHES`` squares, each of at most ``AREA / PATCHES`` of the image (the side
    rounded down), at uniformly drawn positions, each filled with a uniformly drawn grey."""
    h, w = image.shape[:2]
    sh, sw = _square(h, w, AREA[severity - 1] / PATCHES, at_most=True)
    ys = rng.integers(0, h - sh + 1, PATCHES)
    xs = rng.integers(0, w - sw + 1, PATCHES)
    greys = rng.integers(0, 256, PATCHES)
    out = image.copy()
    for y, x, grey in zip(ys, xs, greys, strict=True):
        out[y : y + sh, x : x + sw] = grey
    return out

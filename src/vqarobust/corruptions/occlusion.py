"""Occlusion: part of the image hidden, at five area fractions, in one square (cutout),
in many small ones (random patches), or in many small ones that stay off the objects the
questions depend on (``occlude_context``, the pixel-level sibling of SwapMix's context
swaps: what it hides should not change a right answer).

Positions and fills are drawn from the item's ``rng``. A cutout is black (as in Cutout,
DeVries & Taylor 2017); patches take a random grey each, so that their edges, not only
their darkness, are what a model sees. Patches may overlap, so the hidden share of the
image is at most ``AREA[severity - 1]``; a cutout hides exactly that share up to
rounding its side to whole pixels.
"""

from __future__ import annotations

import numpy as np

from vqarobust.corruptions.boxes import NEEDS, covered, pixel_bounds
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
    sh, sw = patch_side(h, w, severity)
    ys = rng.integers(0, h - sh + 1, PATCHES)
    xs = rng.integers(0, w - sw + 1, PATCHES)
    greys = rng.integers(0, 256, PATCHES)
    out = image.copy()
    for y, x, grey in zip(ys, xs, greys, strict=True):
        out[y : y + sh, x : x + sw] = grey
    return out


def free_positions(height: int, width: int, sh: int, sw: int, boxes: np.ndarray) -> np.ndarray:
    """Top-left corners where an ``sh`` x ``sw`` square overlaps none of ``boxes``, as flat
    indices ``y * (width - sw + 1) + x`` in increasing order (a summed-area table)."""
    inside = np.pad(
        covered(boxes, height, width).astype(np.int32).cumsum(0).cumsum(1), ((1, 0), (1, 0))
    )
    hits = inside[sh:, sw:] - inside[:-sh, sw:] - inside[sh:, :-sw] + inside[:-sh, :-sw]
    return np.flatnonzero(hits == 0)


def patch_side(height: int, width: int, severity: int) -> tuple[int, int]:
    """Height and width of one of ``random_patches``' (and ``occlude_context``'s) squares."""
    return _square(height, width, AREA[severity - 1] / PATCHES, at_most=True)


def _occlusion_shortfall(height: int, width: int, severity: int, boxes: np.ndarray) -> str | None:
    free = free_positions(height, width, *patch_side(height, width, severity), boxes)
    return None if len(free) else "no room outside the objects: unchanged"


@CORRUPTIONS.register(family="occlusion", needs=NEEDS, shortfall=_occlusion_shortfall)
def occlude_context(
    image: np.ndarray, severity: int, rng: np.random.Generator, boxes: np.ndarray | None
) -> np.ndarray:
    """``random_patches`` kept off the questions' objects: ``PATCHES`` squares of the same
    size and greys, each at a position drawn uniformly among those where it overlaps
    none of ``boxes`` (:func:`free_positions`). ``boxes`` are the objects the image's
    questions depend on (:mod:`vqarobust.datasets.object_boxes`); without any (None: no
    box data; or none relevant) it is ``random_patches``. Where no position is free the
    image is returned unchanged (the subset's log counts such images)."""
    h, w = image.shape[:2]
    b = pixel_bounds(boxes if boxes is not None else np.zeros((0, 4)), h, w)
    if not len(b):
        return random_patches(image, severity, rng)
    sh, sw = patch_side(h, w, severity)
    free = free_positions(h, w, sh, sw, b)
    if not len(free):
        return image.copy()
    ys, xs = np.divmod(free[rng.integers(0, len(free), PATCHES)], w - sw + 1)
    greys = rng.integers(0, 256, PATCHES)
    out = image.copy()
    for y, x, grey in zip(ys, xs, greys, strict=True):
        out[y : y + sh, x : x + sw] = grey
    return out

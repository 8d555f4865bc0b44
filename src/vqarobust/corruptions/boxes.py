"""Object boxes as the box-aware corruptions (``object_crop``, ``occlude_context``) read
them: float (x0, y0, x1, y1) pixels of the stored image (the ``boxes`` table of
:mod:`vqarobust.datasets.object_boxes`), widened to whole pixels and clipped to it."""

from __future__ import annotations

import numpy as np

NEEDS = "boxes"  # the ``needs`` tag of a corruption that takes ``boxes=``


def pixel_bounds(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """Integer (x0, y0, x1, y1) of each box, widened outward to whole pixels and clipped to
    the image; boxes wholly outside it are dropped (an (n, 4) int64 array)."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    lo = np.floor(b[:, :2]).clip(0, [width, height])
    hi = np.ceil(b[:, 2:]).clip(0, [width, height])
    out = np.concatenate([lo, hi], axis=1).astype(np.int64)
    return out[(out[:, 2] > out[:, 0]) & (out[:, 3] > out[:, 1])]


def covered(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """A height x width bool mask, True inside any box."""
    mask = np.zeros((height, width), bool)
    for x0, y0, x1, y1 in pixel_bounds(boxes, height, width):
        mask[y0:y1, x0:x1] = True
    return mask

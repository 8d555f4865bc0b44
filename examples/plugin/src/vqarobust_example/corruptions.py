"""A corruption: a lens vignette, the image darkened towards its corners."""

from __future__ import annotations

import numpy as np

from vqarobust.corruptions import CORRUPTIONS

STRENGTH = (0.2, 0.35, 0.5, 0.65, 0.8)  # darkening at the farthest corner, per severity


@CORRUPTIONS.register(family="lens")
def vignette(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Each pixel scaled by 1 - s r^2, r its distance from the centre over the distance
    of the farthest corner, s from ``STRENGTH``; the centre shifted by up to 5% of each
    side, drawn from the item's ``rng`` (so two images differ, one image never)."""
    h, w = image.shape[:2]
    cy, cx = (np.array([h, w]) - 1) / 2 + rng.uniform(-0.05, 0.05, 2) * np.array([h, w])
    y, x = np.mgrid[0:h, 0:w]
    r2 = (y - cy) ** 2 + (x - cx) ** 2
    gain = 1 - STRENGTH[severity - 1] * r2 / r2.max()
    return np.clip(image * gain[..., None], 0, 255).round().astype(np.uint8)

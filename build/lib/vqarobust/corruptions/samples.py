"""Synthetic photo-like images for tests, benchmarks and previews (no download needed)."""

from __future__ import annotations

import numpy as np


def photo_like(height: int, width: int, seed: int = 0) -> np.ndarray:
    """An HxWx3 uint8 image with smooth gradients, a few flat rectangles and sensor noise:
    edges, flat areas and texture, like a photograph rather than pure noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (height + width)], axis=-1)
    for _ in range(6):
        y0, x0 = rng.integers(0, height // 2), rng.integers(0, width // 2)
        img[y0 : y0 + height // 4, x0 : x0 + width // 4] = rng.integers(0, 256, 3)
    return np.clip(img + rng.normal(0, 4, img.shape), 0, 255).astype(np.uint8)


def edge_cases(height: int = 64, width: int = 64) -> np.ndarray:
    """Black, white, gray and saturated patches next to a gradient: the pixels where HSV
    conversions and clipping have special cases."""
    img = photo_like(height, width, seed=99)
    h4, w4 = height // 4, width // 4
    img[:h4, :w4] = 0
    img[:h4, w4 : 2 * w4] = 255
    img[h4 : 2 * h4, :w4] = 128
    img[h4 : 2 * h4, w4 : 2 * w4] = (255, 0, 0)
    img[2 * h4 : 3 * h4, :w4] = (0, 255, 255)
    return img

"""Geometric corruptions: rotation, shear, translation, perspective and a centre zoom,
each through albumentations (its ``Affine`` and ``Perspective`` transforms, on OpenCV's
``warpAffine``/``warpPerspective``), which defines how each parameter acts.

Every random choice (the direction of a rotation, shear or shift; the perspective's
corner offsets) is drawn from the item's ``rng``, so the output is a function of the
image, the severity and the item's seed. The border a transform uncovers is filled with
black (``BORDER``: albumentations' default, constant 0). Severity scales follow
VLM-RobustBench's geometric group in spirit (small angles up to about 35 degrees,
shifts up to a quarter of the image); docs/corruptions.md lists them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vqarobust.corruptions.registry import CORRUPTIONS

ROTATE_DEGREES = (5, 10, 15, 25, 35)
SHEAR_DEGREES = (5, 10, 15, 20, 25)
TRANSLATE_FRACTION = (0.05, 0.1, 0.15, 0.2, 0.25)
PERSPECTIVE_SCALE = (0.02, 0.04, 0.06, 0.08, 0.1)
ZOOM_KEEP = (0.9, 0.8, 0.7, 0.6, 0.5)  # share of each side the centre zoom keeps
BORDER = 0  # cv2.BORDER_CONSTANT, filled with 0


def _apply(transform: Any, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # A transform that draws internally is seeded from the item's rng.
    transform.set_random_seed(int(rng.integers(2**32)))
    return np.ascontiguousarray(transform(image=image)["image"])


def _sign(rng: np.random.Generator) -> int:
    return 1 if rng.random() < 0.5 else -1


@CORRUPTIONS.register(family="geometric")
def rotate(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Rotated about the centre by ``ROTATE_DEGREES`` (either direction), size kept."""
    import albumentations as A

    angle = _sign(rng) * ROTATE_DEGREES[severity - 1]
    return _apply(A.Affine(rotate=(angle, angle), border_mode=BORDER, p=1.0), image, rng)


@CORRUPTIONS.register(family="geometric")
def shear(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Sheared horizontally by ``SHEAR_DEGREES`` (either direction) about the centre."""
    import albumentations as A

    angle = _sign(rng) * SHEAR_DEGREES[severity - 1]
    transform = A.Affine(shear={"x": (angle, angle), "y": (0, 0)}, border_mode=BORDER, p=1.0)
    return _apply(transform, image, rng)


@CORRUPTIONS.register(family="geometric")
def translate(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Shifted by ``TRANSLATE_FRACTION`` of the image's size in a uniformly drawn
    direction; what leaves the frame is cropped, the uncovered part black."""
    import albumentations as A

    theta = rng.uniform(0, 2 * np.pi)
    fx, fy = TRANSLATE_FRACTION[severity - 1] * np.array([np.cos(theta), np.sin(theta)])
    transform = A.Affine(translate_percent={"x": (fx, fx), "y": (fy, fy)}, border_mode=BORDER,
                         p=1.0)  # fmt: skip
    return _apply(transform, image, rng)


@CORRUPTIONS.register(family="geometric")
def perspective(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """A perspective warp: each corner moved by up to ``PERSPECTIVE_SCALE`` of the size
    (albumentations' ``Perspective``, its offsets drawn from the item's seed), size kept."""
    import albumentations as A

    scale = PERSPECTIVE_SCALE[severity - 1]
    transform = A.Perspective(scale=(scale, scale), keep_size=True, border_mode=BORDER, p=1.0)
    return _apply(transform, image, rng)


@CORRUPTIONS.register(family="geometric")
def zoom_crop(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """The centre ``ZOOM_KEEP`` of each side, scaled back up to the full size (a centre
    crop; a crop that keeps the question's objects needs their boxes)."""
    import albumentations as A

    zoom = 1 / ZOOM_KEEP[severity - 1]
    return _apply(A.Affine(scale=(zoom, zoom), border_mode=BORDER, p=1.0), image, rng)

"""Geometric corruptions: rotation, shear, translation, perspective, a centre zoom and
the horizontal flip (one severity),
each through albumentations (its ``Affine`` and ``Perspective`` transforms, on OpenCV's
``warpAffine``/``warpPerspective``), which defines how each parameter acts.

Every random choice (the direction of a rotation, shear or shift; the perspective's
corner offsets) is drawn from the item's ``rng``, so the output is a function of the
image, the severity and the item's seed. The border a rotation, shear or shift
uncovers is filled as the ``border`` option says (``BORDERS``; config key
``geometric.border``): black (``constant``, albumentations' default), the image mirrored
(``reflect``) or its edge pixels repeated (``replicate``). Severity scales follow
VLM-RobustBench's geometric group in spirit (small angles up to about 35 degrees,
shifts up to a quarter of the image); docs/corruptions.md lists them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vqarobust.corruptions.boxes import NEEDS, pixel_bounds
from vqarobust.corruptions.registry import CORRUPTIONS

ROTATE_DEGREES = (5, 10, 15, 25, 35)
SHEAR_DEGREES = (5, 10, 15, 20, 25)
TRANSLATE_FRACTION = (0.05, 0.1, 0.15, 0.2, 0.25)
PERSPECTIVE_SCALE = (0.02, 0.04, 0.06, 0.08, 0.1)
ZOOM_KEEP = (0.9, 0.8, 0.7, 0.6, 0.5)  # share of each side the centre zoom keeps
# OpenCV's border modes: constant (filled with 0), reflect_101 (mirrored without
# repeating the edge pixel), replicate.
BORDERS = {"constant": 0, "reflect": 4, "replicate": 1}
DEFAULT_BORDER = "constant"
BORDER_OPTION = {"options": ("border",)}  # the corruptions that take it


def _border(name: str) -> int:
    if name not in BORDERS:
        raise ValueError(f"border must be one of {', '.join(BORDERS)}, got {name!r}")
    return BORDERS[name]


def _apply(transform: Any, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # A transform that draws internally is seeded from the item's rng.
    transform.set_random_seed(int(rng.integers(2**32)))
    return np.ascontiguousarray(transform(image=image)["image"])


def _sign(rng: np.random.Generator) -> int:
    return 1 if rng.random() < 0.5 else -1


@CORRUPTIONS.register(family="geometric", **BORDER_OPTION)
def rotate(
    image: np.ndarray, severity: int, rng: np.random.Generator, border: str = DEFAULT_BORDER
) -> np.ndarray:
    """Rotated about the centre by ``ROTATE_DEGREES`` (either direction), size kept."""
    import albumentations as A

    angle = _sign(rng) * ROTATE_DEGREES[severity - 1]
    return _apply(A.Affine(rotate=(angle, angle), border_mode=_border(border), p=1.0), image, rng)


@CORRUPTIONS.register(family="geometric", **BORDER_OPTION)
def shear(
    image: np.ndarray, severity: int, rng: np.random.Generator, border: str = DEFAULT_BORDER
) -> np.ndarray:
    """Sheared horizontally by ``SHEAR_DEGREES`` (either direction) about the centre."""
    import albumentations as A

    angle = _sign(rng) * SHEAR_DEGREES[severity - 1]
    transform = A.Affine(
        shear={"x": (angle, angle), "y": (0, 0)}, border_mode=_border(border), p=1.0
    )
    return _apply(transform, image, rng)


@CORRUPTIONS.register(family="geometric", **BORDER_OPTION)
def translate(
    image: np.ndarray, severity: int, rng: np.random.Generator, border: str = DEFAULT_BORDER
) -> np.ndarray:
    """Shifted by (f cos t) of the width and (f sin t) of the height, f from
    ``TRANSLATE_FRACTION`` and the direction t drawn uniformly; what leaves the frame is
    cropped, the uncovered part filled as ``border`` says."""
    import albumentations as A

    theta = rng.uniform(0, 2 * np.pi)
    fx, fy = TRANSLATE_FRACTION[severity - 1] * np.array([np.cos(theta), np.sin(theta)])
    shift = {"x": (fx, fx), "y": (fy, fy)}
    transform = A.Affine(translate_percent=shift, border_mode=_border(border), p=1.0)
    return _apply(transform, image, rng)


@CORRUPTIONS.register(family="geometric")
def perspective(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """A perspective warp (albumentations' ``Perspective``): each corner of a
    quadrilateral lies at a distance |N(0, ``PERSPECTIVE_SCALE``)| of the size from the
    image's corner, inside it, and the quadrilateral is warped to the full frame, so no
    border is uncovered; the distances are drawn from the item's seed."""
    import albumentations as A

    scale = PERSPECTIVE_SCALE[severity - 1]
    transform = A.Perspective(scale=(scale, scale), keep_size=True, p=1.0)
    return _apply(transform, image, rng)


@CORRUPTIONS.register(family="geometric")
def zoom_crop(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """The centre ``ZOOM_KEEP`` of each side, scaled back up to the full size (a centre
    crop; ``object_crop`` is the crop that keeps the questions' objects)."""
    import albumentations as A

    zoom = 1 / ZOOM_KEEP[severity - 1]
    return _apply(
        A.Affine(scale=(zoom, zoom), border_mode=BORDERS[DEFAULT_BORDER], p=1.0), image, rng
    )


def crop_size(height: int, width: int, severity: int, boxes: np.ndarray) -> tuple[int, int, bool]:
    """``object_crop``'s window (height, width): ``ZOOM_KEEP`` of each side, widened (the
    image's aspect kept to a pixel) until it holds the union of ``boxes``; and whether it
    had to be widened (then the image is zoomed less than its severity says)."""
    keep = ZOOM_KEEP[severity - 1]
    b = pixel_bounds(boxes, height, width)
    uh = int(b[:, 3].max() - b[:, 1].min()) if len(b) else 0
    uw = int(b[:, 2].max() - b[:, 0].min()) if len(b) else 0
    scale = max(keep, uh / height, uw / width)
    ch = min(height, max(round(scale * height), uh))
    cw = min(width, max(round(scale * width), uw))
    return ch, cw, scale > keep


def crop_window(
    height: int, width: int, severity: int, boxes: np.ndarray, rng: np.random.Generator
) -> tuple[int, int, int, int]:
    """``object_crop``'s window (x, y, width, height): :func:`crop_size`, at a position
    drawn uniformly among those that hold every one of ``boxes`` (at least one)."""
    b = pixel_bounds(boxes, height, width)
    ch, cw, _ = crop_size(height, width, severity, b)
    x = int(rng.integers(max(0, b[:, 2].max() - cw), min(b[:, 0].min(), width - cw) + 1))
    y = int(rng.integers(max(0, b[:, 3].max() - ch), min(b[:, 1].min(), height - ch) + 1))
    return x, y, cw, ch


def _crop_shortfall(height: int, width: int, severity: int, boxes: np.ndarray) -> str | None:
    widened = crop_size(height, width, severity, boxes)[2]
    return "window widened to hold the objects" if widened else None


@CORRUPTIONS.register(family="geometric", needs=NEEDS, shortfall=_crop_shortfall)
def object_crop(
    image: np.ndarray, severity: int, rng: np.random.Generator, boxes: np.ndarray | None
) -> np.ndarray:
    """A random crop that keeps the questions' objects: a window of ``ZOOM_KEEP`` of each
    side (widened where the objects need it, :func:`crop_size`) at a uniformly drawn
    position among those that hold every box in ``boxes``, scaled back up (bilinear) to
    the full size with albumentations' ``Crop`` and ``Resize``. ``boxes`` are the objects
    the image's questions depend on (:mod:`vqarobust.datasets.object_boxes`); without
    any (None: no box data; or none relevant) it is ``zoom_crop``, the centre crop."""
    import albumentations as A
    import cv2

    h, w = image.shape[:2]
    b = pixel_bounds(boxes if boxes is not None else np.zeros((0, 4)), h, w)
    if not len(b):
        return zoom_crop(image, severity, rng)
    x, y, cw, ch = crop_window(h, w, severity, b, rng)
    crop = A.Crop(x_min=x, y_min=y, x_max=x + cw, y_max=y + ch, p=1.0)(image=image)["image"]
    resize = A.Resize(height=h, width=w, interpolation=cv2.INTER_LINEAR, p=1.0)
    return np.ascontiguousarray(resize(image=crop)["image"])


@CORRUPTIONS.register(family="geometric", severities=1)
def horizontal_flip(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Mirrored left to right (albumentations' ``HorizontalFlip``). A flip changes the
    answer of questions about sides and text: scoring marks them and scores them
    against swapped answers or leaves them out (:mod:`vqarobust.metrics.flip`)."""
    import albumentations as A

    return _apply(A.HorizontalFlip(p=1.0), image, rng)

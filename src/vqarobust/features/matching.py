"""Match detected boxes to scene-graph objects by IoU (the SwapMix paper's matching)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

IOU_THRESHOLD = 0.5


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (n, 4) with every box of ``b`` (m, 4), boxes as
    (x0, y0, x1, y1): an (n, m) matrix."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def match_detections(
    detections: np.ndarray,
    objects: np.ndarray,
    object_ids: Sequence[str],
    threshold: float = IOU_THRESHOLD,
) -> list[str | None]:
    """Per detection, the scene-graph object it shows: the object of highest IoU with it
    when that IoU is at least ``threshold``, else None (left alone, counted by callers).
    Several detections may match one object (a detector finds an object more than once)."""
    if len(objects) == 0:
        return [None] * len(detections)
    scores = iou(detections, objects)
    best = scores.argmax(axis=1)
    return [object_ids[j] if scores[i, j] >= threshold else None for i, j in enumerate(best)]

"""The objects of scenes images as feature-table rows (boxes and labels from the graph).

The scenes' "detections" are the scene graph's objects themselves (gold boxes, as GQA's
perfect-sight setting uses): row ``i`` of an image is object ``i`` of its graph. The
labels are the class (``shape``) and the attributes (``colour``, ``size``).
"""

from __future__ import annotations

from collections.abc import Iterable

from vqarobust.datasets import scenes


def object_rows(scene_seed: int, split: str, image_ids: Iterable[int]) -> list[dict]:
    """One row per object of the given images: FEATURE_SCHEMA's columns but ``feature``."""
    rows = []
    for image_id in sorted(set(image_ids)):
        for o in scenes.scene(scene_seed, split, image_id):
            x0, y0, x1, y1 = o.box
            rows.append(
                {
                    "image_id": image_id,
                    "object_index": o.id,
                    "object_id": str(o.id),
                    "box": [x0 / scenes.SIDE, y0 / scenes.SIDE, x1 / scenes.SIDE, y1 / scenes.SIDE],
                    "class": o.shape,
                    "attributes": [o.colour, o.size],
                }
            )
    return rows


def names() -> tuple[list[str], list[str]]:
    """Every class and every attribute name of scenes."""
    return list(scenes.SHAPES), [*scenes.COLOURS, *scenes.SIZES]

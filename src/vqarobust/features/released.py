"""Released detector features, read lazily per image (never a whole file in memory).

* GQA's object features: ``gqa_objects_info.json`` maps each image id to its ``width``,
  ``height``, ``objectsNum`` and its slot (``file``, ``idx``) in ``gqa_objects_<file>.h5``,
  whose datasets ``bboxes`` (images x 100 x 4: x0, y0, x1, y1 in pixels) and ``features``
  (images x 100 x 2048) hold up to 100 detections per image; an image's detections are
  the first ``objectsNum`` rows of its slot. h5py reads just that slice.
* LXMERT's ``*_obj36.tsv``: one line per image, tab-separated ``img_id``, ``img_h``,
  ``img_w``, ``objects_id``, ``objects_conf``, ``attrs_id``, ``attrs_conf``,
  ``num_boxes``, ``boxes``, ``features``, the arrays base64-encoded (ids int64, the rest
  float32; boxes x0, y0, x1, y1 in pixels). The file is streamed and only the wanted
  lines are decoded.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OBJ36_FIELDS = (
    "img_id",
    "img_h",
    "img_w",
    "objects_id",
    "objects_conf",
    "attrs_id",
    "attrs_conf",
    "num_boxes",
    "boxes",
    "features",
)


@dataclass(frozen=True)
class Detections:
    """One image's detections: pixel boxes (x0, y0, x1, y1) and feature rows."""

    image_id: str
    width: int
    height: int
    boxes: np.ndarray  # (n, 4) float32, pixels
    features: np.ndarray  # (n, dim) float32

    def normalized_boxes(self) -> np.ndarray:
        """Boxes divided by the image's width and height (LXMERT's ``visual_pos``)."""
        return (self.boxes / np.array([self.width, self.height] * 2, np.float32)).astype(np.float32)


class GqaObjects:
    """GQA's object features: ``info_path`` and the folder of ``gqa_objects_<n>.h5``."""

    def __init__(self, info_path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> None:
        with open(info_path, encoding="utf-8") as fh:
            self.info: dict[str, dict[str, Any]] = json.load(fh)
        self.folder = Path(folder)
        self._files: dict[int, Any] = {}

    def __contains__(self, image_id: object) -> bool:
        return str(image_id) in self.info

    def _file(self, index: int) -> Any:
        import h5py

        if index not in self._files:
            path = self.folder / f"gqa_objects_{index}.h5"
            if not path.is_file():
                raise FileNotFoundError(f"{path} (named by the info file) does not exist")
            self._files[index] = h5py.File(path, "r")
        return self._files[index]

    def read(self, image_id: str) -> Detections:
        """The detections of one image (its slot's first ``objectsNum`` rows)."""
        entry = self.info.get(str(image_id))
        if entry is None:
            raise KeyError(f"GQA object features: no image {image_id!r} in the info file")
        h5 = self._file(int(entry["file"]))
        n, idx = int(entry["objectsNum"]), int(entry["idx"])
        boxes = np.asarray(h5["bboxes"][idx, :n], np.float32)
        features = np.asarray(h5["features"][idx, :n], np.float32)
        return Detections(str(image_id), int(entry["width"]), int(entry["height"]), boxes, features)

    def close(self) -> None:
        """Close the open h5 files."""
        for f in self._files.values():
            f.close()
        self._files = {}

    def __enter__(self) -> GqaObjects:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _array(field: str, dtype: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    out = np.frombuffer(base64.b64decode(field), dtype=dtype)
    return out.reshape(shape) if shape is not None else out


def read_obj36(path: str | os.PathLike[str], image_ids: Iterable[str]) -> dict[str, Detections]:
    """The detections of the wanted images from an LXMERT ``obj36`` TSV (streamed)."""
    wanted = {str(i) for i in image_ids}
    out: dict[str, Detections] = {}
    # A line holds a 36 x 2048 float32 matrix in base64 (~400 KB): csv's default field
    # limit is too small for it, so the lines are split by hand.
    with open(path, encoding="ascii") as fh:
        for number, line in enumerate(fh, 1):
            head, _, rest = line.partition("\t")
            if head not in wanted:
                continue
            fields = [head, *rest.rstrip("\n").split("\t")]
            if len(fields) != len(OBJ36_FIELDS):
                raise ValueError(
                    f"{path}, line {number}: {len(fields)} fields, expected "
                    f"{len(OBJ36_FIELDS)} ({', '.join(OBJ36_FIELDS)})"
                )
            row = dict(zip(OBJ36_FIELDS, fields, strict=True))
            n = int(row["num_boxes"])
            # Little-endian, as LXMERT's extraction (numpy on x86) wrote them.
            boxes = _array(row["boxes"], "<f4", (n, 4))
            features = _array(row["features"], "<f4").reshape(n, -1)
            size = int(row["img_w"]), int(row["img_h"])
            out[head] = Detections(
                head, *size, boxes.astype(np.float32), features.astype(np.float32)
            )
            if len(out) == len(wanted):
                break
    return out


def encode_obj36_line(
    image_id: str, width: int, height: int, boxes: np.ndarray, features: np.ndarray
) -> str:
    """One line of an ``obj36`` TSV (for tests and conversions); the class and attribute
    ids and confidences are zeros."""
    n = len(boxes)

    def b64(a: np.ndarray) -> str:
        return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")

    ids, conf = np.zeros(n, "<i8"), np.zeros(n, "<f4")
    fields = [
        image_id,
        str(height),
        str(width),
        b64(ids),
        b64(conf),
        b64(ids),
        b64(conf),
        str(n),
        b64(boxes.astype("<f4")),
        b64(features.astype("<f4")),
    ]
    return "\t".join(fields) + "\n"

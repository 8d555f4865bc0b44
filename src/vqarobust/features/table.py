"""The feature table: one row per object of an image, and its reader.

Rows of one image are numbered 0..n-1 (``object_index``) in the order a model sees them.
``box`` is (x0, y0, x1, y1) divided by the image's width and height, as LXMERT's
``visual_pos`` expects. ``class`` and ``attributes`` are the object's labels where the
source knows them (scene graphs; a released detection matched to one), which feature
swaps use to pick donors. A perfect-sight table also carries its word vectors (the key
:data:`VOCAB_KEY` of the Parquet metadata), so a swap that changes an object's labels
can encode the new labels exactly as the table's own rows were encoded.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vqarobust import store

FEATURE_SCHEMA = pa.schema(
    [
        ("image_id", pa.int64()),
        ("object_index", pa.int16()),
        ("object_id", pa.string()),  # the scene-graph object; null for an unmatched detection
        ("box", pa.list_(pa.float32(), 4)),
        ("class", pa.string()),
        ("attributes", pa.list_(pa.string())),
        ("feature", pa.list_(pa.float32())),
    ]
)
# Parquet metadata: what made the table (kind, dimension, source settings) and, for
# perfect sight, the word vectors of its names.
INFO_KEY = b"vqarobust.features"
VOCAB_KEY = b"vqarobust.vocab"


@dataclass(frozen=True)
class RegionFeatures:
    """The objects of one image as a region-feature model sees them."""

    features: np.ndarray  # (n, dim) float32
    boxes: np.ndarray  # (n, 4) float32, normalized (x0, y0, x1, y1)

    def __post_init__(self) -> None:
        if self.features.ndim != 2 or self.boxes.shape != (len(self.features), 4):
            raise ValueError(
                f"region features need (n, dim) features and (n, 4) boxes, got "
                f"{self.features.shape} and {self.boxes.shape}"
            )

    def with_row(self, row: int, feature: np.ndarray) -> RegionFeatures:
        """The same objects with row ``row``'s feature replaced (boxes unchanged)."""
        features = self.features.copy()
        features[row] = feature
        return RegionFeatures(features, self.boxes)


def encode_vocab(vectors: Mapping[str, np.ndarray]) -> bytes:
    """Word vectors as Parquet metadata: names and one base64 float32 matrix."""
    names = sorted(vectors)
    matrix = (
        np.stack([np.asarray(vectors[n], np.float32) for n in names])
        if names
        else (np.zeros((0, 0), np.float32))
    )
    payload = {
        "names": names,
        "dim": int(matrix.shape[1]) if names else 0,
        "vectors": base64.b64encode(matrix.tobytes()).decode("ascii"),
    }
    return json.dumps(payload).encode("utf-8")


def decode_vocab(data: bytes) -> dict[str, np.ndarray]:
    """The inverse of :func:`encode_vocab`."""
    payload = json.loads(data)
    matrix = np.frombuffer(base64.b64decode(payload["vectors"]), np.float32)
    matrix = matrix.reshape(len(payload["names"]), payload["dim"])
    return {n: matrix[i] for i, n in enumerate(payload["names"])}


def feature_table(rows: Iterable[dict], matrix: np.ndarray | None = None) -> pa.Table:
    """Rows (dicts with FEATURE_SCHEMA's columns) as a table, sorted by image and row;
    with ``matrix``, row i's ``feature`` is ``matrix[i]`` (no Python list per row: a
    split's bank of released features holds hundreds of thousands of 2048-d rows)."""
    rows = list(rows)
    if matrix is None:
        table = pa.Table.from_pylist(rows, schema=FEATURE_SCHEMA)
    else:
        matrix = np.ascontiguousarray(matrix, np.float32)
        if matrix.ndim != 2 or len(matrix) != len(rows):
            raise ValueError(f"{len(rows)} rows need an (n, dim) matrix, got {matrix.shape}")
        labels = pa.schema([f for f in FEATURE_SCHEMA if f.name != "feature"])
        table = pa.Table.from_pylist(rows, schema=labels)
        flat = pa.array(matrix.reshape(-1), pa.float32())
        offsets = pa.array(np.arange(len(rows) + 1, dtype=np.int32) * matrix.shape[1])
        table = table.append_column("feature", pa.ListArray.from_arrays(offsets, flat))
        table = table.cast(FEATURE_SCHEMA)
    return table.sort_by([("image_id", "ascending"), ("object_index", "ascending")])


def write_features(
    table: pa.Table,
    path: str | os.PathLike[str],
    info: Mapping[str, object],
    vocab: Mapping[str, np.ndarray] | None = None,
) -> None:
    """Write a feature table atomically with its metadata (``info`` must name ``kind``)."""
    if table.num_rows:
        dims = set(pc.list_value_length(table.column("feature")).unique().to_pylist())
        if len(dims) != 1:
            raise ValueError(f"feature rows of different lengths: {sorted(dims)}")
        info = {**info, "dim": dims.pop()}
    meta = {INFO_KEY: json.dumps(dict(info), sort_keys=True).encode("utf-8")}
    if vocab is not None:
        meta[VOCAB_KEY] = encode_vocab(vocab)
    store.write_table(table.cast(FEATURE_SCHEMA).replace_schema_metadata(meta), path)


def read_info(path: str | os.PathLike[str]) -> dict:
    """The metadata a feature table was written with (kind, dim, ...)."""
    meta = pq.read_schema(path).metadata or {}
    if INFO_KEY not in meta:
        raise ValueError(f"{path} is not a feature table (no {INFO_KEY.decode()} metadata)")
    return json.loads(meta[INFO_KEY])


def read_vocab(path: str | os.PathLike[str]) -> dict[str, np.ndarray] | None:
    """The word vectors of a perfect-sight table, or None."""
    meta = pq.read_schema(path).metadata or {}
    return decode_vocab(meta[VOCAB_KEY]) if VOCAB_KEY in meta else None


class FeatureTable:
    """A feature table in memory, indexed by image: matrices, boxes and labels.

    Scenes and GQA miniatures fit in memory; the released full-size files are read
    lazily by :mod:`vqarobust.features.released` and materialized per split first.
    """

    def __init__(self, table: pa.Table, vocab: Mapping[str, np.ndarray] | None = None) -> None:
        table = table.sort_by([("image_id", "ascending"), ("object_index", "ascending")])
        self.image_ids = np.asarray(table.column("image_id").to_numpy())
        self.classes = table.column("class").to_pylist()
        self.attributes = [tuple(a or ()) for a in table.column("attributes").to_pylist()]
        self.object_ids = table.column("object_id").to_pylist()
        flat = table.column("feature").combine_chunks()
        dim = len(flat[0]) if len(flat) else 0
        # Copies (arrow's buffers are read-only): swaps write rows of copies of these.
        self.matrix = np.array(flat.flatten().to_numpy(zero_copy_only=False), np.float32).reshape(
            len(flat), dim
        )
        boxes = table.column("box").combine_chunks()
        self.boxes = np.array(boxes.flatten().to_numpy(zero_copy_only=False), np.float32).reshape(
            len(boxes), 4
        )
        self.vocab = dict(vocab) if vocab is not None else None
        starts = np.flatnonzero(np.r_[True, self.image_ids[1:] != self.image_ids[:-1]])
        ends = np.r_[starts[1:], len(self.image_ids)]
        pairs = zip(starts.tolist(), ends.tolist(), strict=True)
        self.rows = {int(self.image_ids[s]): (s, e) for s, e in pairs}

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> FeatureTable:
        """Load a feature table written by :func:`write_features`."""
        return cls(pq.read_table(path), read_vocab(path))

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __contains__(self, image_id: int) -> bool:
        return int(image_id) in self.rows

    def region_features(self, image_id: int) -> RegionFeatures:
        """The image's objects (a copy: callers may change rows)."""
        start, end = self.rows[int(image_id)]
        return RegionFeatures(self.matrix[start:end].copy(), self.boxes[start:end].copy())

    def row(self, image_id: int, object_index: int) -> int:
        """The table row of an image's object."""
        start, end = self.rows[int(image_id)]
        if not 0 <= object_index < end - start:
            raise IndexError(f"image {image_id} has {end - start} objects, not {object_index + 1}")
        return start + int(object_index)

    def labels(self, image_id: int) -> list[tuple[str | None, tuple[str, ...], str | None]]:
        """(class, attributes, object id) of the image's objects, by row."""
        start, end = self.rows[int(image_id)]
        return [
            (self.classes[i], self.attributes[i], self.object_ids[i]) for i in range(start, end)
        ]

    def encode_labels(self, cls: str, attributes: Sequence[str]) -> np.ndarray:
        """A perfect-sight row for these labels, with this table's word vectors."""
        from vqarobust.features.perfect_sight import encode_object

        if self.vocab is None:
            raise ValueError("this feature table has no word vectors: not a perfect-sight table")
        return encode_object(cls, attributes, self.vocab)

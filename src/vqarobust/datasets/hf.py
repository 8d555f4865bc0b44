"""Hugging Face datasets: a folder written by ``save_to_disk`` or a folder of Parquet
shards in the hub's layout (``data/validation-00000-of-00002.parquet``, ...).

Read with the ``datasets`` library, memory-mapped: only the question columns are taken
into memory; an image is read when it is asked for, as the bytes the dataset stores
(never re-encoded). ``columns`` maps the fields vqarobust needs to the dataset's column
names, starting from a preset of a common layout:

* ``vqav2`` - VQAv2-style mirrors: ``image``, ``question``, ``answers`` (10 human answers,
  as strings or as ``{"answer": ...}`` records), ``question_id``, ``image_id``,
  ``question_type``, ``answer_type``;
* ``single-answer`` - one ``answer`` string per question (GQA-, OK-VQA-style mirrors),
  no ids: question ids number the rows, image ids the distinct images.

A column mapped to null is absent: question ids then number the rows, image ids number
the distinct images (by the SHA-256 of their bytes, or their path) in row order, question
and answer types are inferred as for JSON Lines. Ids that are strings are numbered by
first appearance. A name that is not a local folder is a hub id, fetched only with
``download: true``.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from vqarobust import store
from vqarobust.datasets.prepare import Dataset
from vqarobust.datasets.question_types import answer_type, question_type
from vqarobust.datasets.sources import ImageSource

FIELDS = ("image", "question", "answers", "question_id", "image_id", "question_type", "answer_type")
REQUIRED = ("image", "question", "answers")
PRESETS: dict[str, dict[str, str | None]] = {
    "vqav2": {f: f for f in FIELDS},
    "single-answer": {
        "image": "image",
        "question": "question",
        "answers": "answer",
        "question_id": None,
        "image_id": None,
        "question_type": None,
        "answer_type": None,
    },
}
DEFAULT_PRESET = "vqav2"
_SAVED = ("dataset_dict.json", "state.json")  # what save_to_disk writes


def column_map(columns: Mapping[str, Any] | None) -> dict[str, str | None]:
    """The dataset column of each field: the preset (``columns.preset``, default vqav2)
    with the entries given in ``columns`` over it."""
    columns = dict(columns or {})
    preset = columns.pop("preset", DEFAULT_PRESET)
    if preset not in PRESETS:
        raise ValueError(f"dataset.columns.preset: unknown {preset!r}; known: {sorted(PRESETS)}")
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise ValueError(f"dataset.columns: unknown fields {unknown}; known: {list(FIELDS)}")
    out = {**PRESETS[preset], **columns}
    absent = [f for f in REQUIRED if not out[f]]
    if absent:
        raise ValueError(f"dataset.columns: {absent} cannot be null")
    return out


def load_split(path: str, split: str, download: bool = False, cache_dir: str | None = None) -> Any:
    """The ``split`` of a saved dataset folder, a Parquet folder in the hub's layout, or
    (with ``download``) a hub dataset, as a memory-mapped ``datasets.Dataset``."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - an optional dependency
        raise ImportError(
            "dataset.adapter hf needs the datasets library: pip install -e '.[hf]'"
        ) from None
    folder = Path(path)
    if not folder.exists() and not download:
        raise FileNotFoundError(
            f"dataset.path {path}: no such folder; a Hugging Face hub id is fetched only "
            "with dataset.download: true"
        )
    if folder.is_dir() and any((folder / name).exists() for name in _SAVED):
        loaded = datasets.load_from_disk(str(folder))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise ValueError(f"{path}: no split {split!r}; it has {sorted(loaded)}")
            return loaded[split]
        return loaded  # a single saved split is that split
    # Parquet in the hub's layout (the library resolves the split from the file names),
    # or a hub id. The Arrow cache it builds goes where the caller says.
    try:
        return datasets.load_dataset(
            str(folder) if folder.exists() else path, split=split, cache_dir=cache_dir
        )
    except ValueError as exc:
        if "Unknown split" in str(exc) or "split" in str(exc).lower():
            raise ValueError(f"{path}: no split {split!r} ({exc})") from None
        raise


def _numbered(values: list[Any]) -> list[int]:
    """Integer ids as they are; anything else numbered by first appearance."""
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return [int(v) for v in values]
    first: dict[Any, int] = {}
    return [first.setdefault(v, len(first)) for v in values]


def _answers(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        out = [v.get("answer") if isinstance(v, dict) else v for v in value]
        if all(isinstance(a, str) for a in out):
            return out
    raise ValueError(
        f"{where}: answers must be a string, a non-empty list of strings or of "
        f"{{'answer': ...}} records, got {value!r:.80}"
    )


class HFImages(ImageSource):
    """The image of each id: one row of the dataset that holds it, read on demand.
    Closing drops the dataset and removes ``cache`` (the Arrow files the Parquet layout
    was converted to)."""

    def __init__(
        self,
        ds: Any,
        rows: Mapping[int, int],
        column: str,
        root: Path,
        cache: tempfile.TemporaryDirectory | None = None,
    ) -> None:
        self._ds, self._rows, self._column, self._root = ds, dict(rows), column, root
        self._cache = cache

    def ids(self) -> set[int]:
        return set(self._rows)

    def read(self, image_id: int) -> bytes:
        if image_id not in self._rows:
            raise FileNotFoundError(f"no image for id {image_id}")
        return _image_bytes(
            self._ds[self._rows[image_id]][self._column], self._root, self.describe(image_id)
        )

    def describe(self, image_id: int) -> str:
        return f"row {self._rows.get(image_id, '?')} (image {image_id})"

    def close(self) -> None:
        self._ds = None
        if self._cache is not None:
            self._cache.cleanup()


def _image_bytes(value: Any, root: Path, where: str) -> bytes:
    """The encoded image of a cell: an Image struct (bytes, or a path), bytes, or a path."""
    if isinstance(value, dict):
        if value.get("bytes"):
            return bytes(value["bytes"])
        value = value.get("path")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str) and value:
        path = Path(value) if Path(value).is_absolute() else root / value
        if not path.is_file():
            raise FileNotFoundError(f"{where}: image file {path} does not exist")
        return path.read_bytes()
    raise FileNotFoundError(f"{where}: no image bytes or path")


def _undecoded(ds: Any, column: str) -> Any:
    """The dataset with ``column`` as stored (Image struct of bytes and path), not PIL."""
    import datasets

    feature = ds.features.get(column)
    if isinstance(feature, datasets.Image) and feature.decode:
        return ds.cast_column(column, datasets.Image(decode=False))
    return ds


def open_hf(
    path: str,
    split: str = "test",
    columns: Mapping[str, Any] | None = None,
    download: bool = False,
) -> Dataset:
    """A Hugging Face dataset split as a questions table and its images (module doc)."""
    names = column_map(columns)
    cache = tempfile.TemporaryDirectory(prefix="vqarobust-hf-")
    ds = load_split(path, split, download, cache_dir=cache.name)
    missing = [f"{c!r} (for {f})" for f, c in names.items() if c and c not in ds.column_names]
    if missing:
        raise ValueError(
            f"{path} [{split}]: no column {', '.join(missing)}; it has {ds.column_names} "
            "(map the fields to them with dataset.columns)"
        )
    ds = _undecoded(ds, names["image"])
    text_cols = [c for f, c in names.items() if c and f != "image"]
    table = ds.select_columns(text_cols).with_format("arrow")[:]
    n = table.num_rows
    where = f"{path} [{split}]"
    col = lambda f: table.column(names[f]).to_pylist() if names[f] else None  # noqa: E731
    questions = col("question")
    bad = [i for i, q in enumerate(questions) if not isinstance(q, str) or not q.strip()]
    if bad:
        raise ValueError(f"{where}: rows {bad[:10]} have no question text")
    answers = [_answers(a, f"{where}, row {i}") for i, a in enumerate(col("answers"))]
    qids = _numbered(col("question_id")) if names["question_id"] else list(range(n))
    if len(set(qids)) != n:
        raise ValueError(f"{where}: question ids repeat")
    if names["image_id"]:
        image_ids = _numbered(col("image_id"))
    else:
        image_ids = _numbered(_image_keys(ds, names["image"], where))
    rows: dict[int, int] = {}
    for row, image_id in enumerate(image_ids):
        rows.setdefault(image_id, row)
    qtypes = col("question_type") or [question_type(q) for q in questions]
    atypes = col("answer_type") or [answer_type(a) for a in answers]
    out = pa.table(
        {
            "question_id": qids,
            "image_id": image_ids,
            "question": questions,
            "answers": answers,
            "question_type": [
                t or question_type(q) for t, q in zip(qtypes, questions, strict=True)
            ],
            "answer_type": [t or answer_type(a) for t, a in zip(atypes, answers, strict=True)],
        },
        schema=store.QUESTION_SCHEMA,
    )
    root = Path(path) if Path(path).is_dir() else Path.cwd()
    images = HFImages(ds, rows, names["image"], root, cache)
    describe = {
        "adapter": "hf",
        "path": path,
        "split": split,
        "rows": n,
        "columns": {f: c for f, c in names.items() if c},
    }
    return Dataset(pl.from_arrow(out), images, describe)


def _image_keys(ds: Any, column: str, where: str) -> list[str]:
    """What identifies each row's image without an image id column: the SHA-256 of its
    bytes (or its path when it has no bytes), read in batches of rows."""
    keys: list[str] = []
    for batch in ds.select_columns([column]).with_format("arrow").iter(batch_size=256):
        for value in batch.column(column).to_pylist():
            if isinstance(value, dict) and value.get("bytes"):
                keys.append(hashlib.sha256(value["bytes"]).hexdigest())
            elif isinstance(value, (bytes, bytearray)):
                keys.append(hashlib.sha256(value).hexdigest())
            else:  # a path, or nothing (a bad image: one id of its own per row)
                path = value.get("path") if isinstance(value, dict) else value
                keys.append(f"path:{path}" if path else f"row:{len(keys)}")
    return keys

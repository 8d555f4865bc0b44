"""Generic adapter: any VQA set as a JSON Lines file.

One object per line::

    {"image": "imgs/0001.jpg", "question": "What is it?", "answers": ["cat", "cat", ...]}

``image`` is a path relative to the file; ``answers`` a list of strings or one string.
Optional: ``question_id`` (integer; default the line's position among non-empty lines),
``image_id`` (integer; default numbered by first appearance of each image path),
``question_type`` (default the VQAv2 prefix of the question) and ``answer_type``
(default inferred from the most common answer: yes/no, number or other).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from vqarobust import store
from vqarobust.datasets.prepare import Dataset
from vqarobust.datasets.question_types import answer_type, question_type
from vqarobust.datasets.sources import PathImages

REQUIRED = ("image", "question", "answers")


def _int_field(obj: dict, key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: {key} must be an integer, got {value!r}")
    return value


def read_jsonl(path: str | os.PathLike[str]) -> tuple[pl.DataFrame, dict[int, Path]]:
    """The questions table and ``{image_id: file}`` of a JSON Lines VQA file."""
    path = Path(path)
    root = path.parent
    rows: list[dict[str, Any]] = []
    files: dict[int, Path] = {}
    by_path: dict[Path, int] = {}
    with open(path, encoding="utf-8") as fh:
        lines = [(n, line) for n, line in enumerate(fh, 1) if line.strip()]
    for position, (number, line) in enumerate(lines):
        where = f"{path}, line {number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object")
        missing = [k for k in REQUIRED if k not in obj]
        if missing:
            raise ValueError(f"{where}: missing {missing}")
        answers = obj["answers"]
        if isinstance(answers, str):
            answers = [answers]
        if not (isinstance(answers, list) and answers and all(isinstance(a, str) for a in answers)):
            raise ValueError(f"{where}: answers must be a string or a non-empty list of strings")
        if not isinstance(obj["question"], str) or not isinstance(obj["image"], str):
            raise ValueError(f"{where}: image and question must be strings")
        image = (root / obj["image"]).resolve()
        image_id = _int_field(obj, "image_id", where)
        if image_id is None:
            image_id = by_path.setdefault(image, len(by_path))
        elif files.get(image_id, image) != image:
            raise ValueError(f"{where}: image_id {image_id} names two files")
        files[image_id] = image
        qid = _int_field(obj, "question_id", where)
        rows.append(
            {
                "question_id": position if qid is None else qid,
                "image_id": image_id,
                "question": obj["question"],
                "answers": answers,
                "question_type": obj.get("question_type") or question_type(obj["question"]),
                "answer_type": obj.get("answer_type") or answer_type(answers),
            }
        )
    if not rows:
        raise ValueError(f"{path}: no questions")
    table = pl.from_arrow(pa.Table.from_pylist(rows, schema=store.QUESTION_SCHEMA))
    return table, files


def open_jsonl(path: str) -> Dataset:
    """A JSON Lines VQA file as a questions table and its image files."""
    table, files = read_jsonl(path)
    return Dataset(table, PathImages(files), {"adapter": "jsonl", "path": path})

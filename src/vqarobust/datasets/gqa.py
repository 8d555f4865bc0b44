"""Adapter for GQA in its official layout (docs/datasets.md).

* balanced questions JSON (e.g. ``val_balanced_questions.json``): ``{question id:
  {"imageId", "question", "answer", "fullAnswer", "semantic": [steps], "annotations":
  {...}, "types": {"structural", "semantic", "detailed"}, ...}}``;
* scene graphs JSON (``val_sceneGraphs.json``): ``{image id: {"width", "height",
  "objects": {object id: {"name", "attributes", "x", "y", "w", "h", "relations"}}}}``;
* images (optional: only pixel models read them): a folder of ``<image id>.jpg``.

GQA's ids are strings: question ids are digit strings (kept as their number); image ids
are digit strings (Visual Genome's) or ``n`` + digits (GQA's own images), which become
:data:`N_OFFSET` + digits so that both kinds fit the integer ``image_id`` column without
colliding; :func:`image_key` turns the number back into GQA's string.

GQA has one answer per question (its metric is exact match): the answer is repeated as
for every single-answer dataset, so VQA accuracy equals exact match. ``question_type``
is GQA's ``types.detailed`` (e.g. ``relS``), ``answer_type`` the VQAv2 rule on the
answer. A question whose image has no scene graph, or that lacks a field, is an error
naming how many and which (as for VQAv2); without ``images`` the prepared split holds no
image shards and only feature models can run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from vqarobust.datasets.prepare import Dataset
from vqarobust.datasets.question_types import single_answer_questions
from vqarobust.datasets.sources import ImageSource, NoImages, PathImages

# GQA's own images ("n" + digits) sit above every Visual Genome id (< 2.5 million).
N_OFFSET = 1_000_000_000
_IMAGE_KEY = re.compile(r"^(n?)(\d+)$")
REQUIRED = ("imageId", "question", "answer")


def image_number(key: str) -> int:
    """GQA's image id string as the integer ``image_id`` (see the module docstring)."""
    match = _IMAGE_KEY.match(str(key))
    if not match or (not match.group(1) and int(match.group(2)) >= N_OFFSET):
        raise ValueError(f"GQA image id {key!r} is neither digits (< {N_OFFSET}) nor 'n' + digits")
    number = int(match.group(2))
    return N_OFFSET + number if match.group(1) else number


def image_key(number: int) -> str:
    """The inverse of :func:`image_number`."""
    return f"n{number - N_OFFSET}" if number >= N_OFFSET else str(number)


def question_number(key: str) -> int:
    """GQA's question id string as an integer (GQA's are digit strings)."""
    if not str(key).isdigit():
        raise ValueError(f"GQA question id {key!r} is not a digit string")
    return int(key)


def read_json(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """A GQA JSON file whose top level is an object keyed by id."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable {what} JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{path}: a {what} file maps ids to entries (a JSON object), "
            f"not a {type(data).__name__}"
        )
    return data


def questions_by_number(
    entries: Mapping[str, Any], path: str | os.PathLike[str] = "questions"
) -> dict[int, Mapping[str, Any]]:
    """The balanced-questions entries by integer question id; entries lacking a field
    raise, naming how many and the first few."""
    bad = [
        qid
        for qid, e in entries.items()
        if not isinstance(e, dict) or any(e.get(k) in (None, "") for k in REQUIRED)
    ]
    if bad:
        raise ValueError(
            f"{path}: {len(bad)} questions lack one of {list(REQUIRED)}, e.g. {sorted(bad)[:10]}"
        )
    out: dict[int, Mapping[str, Any]] = {}
    for qid, entry in entries.items():
        number = question_number(qid)
        if number in out:
            raise ValueError(f"{path}: question ids {qid!r} and another read as {number}")
        out[number] = entry
    return out


class GqaImages(PathImages):
    """``<image id>.jpg`` (or ``.png``) files of a folder, by GQA image number."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"GQA image folder {folder} does not exist")
        paths = {}
        for entry in os.scandir(folder):
            stem, _, ext = entry.name.rpartition(".")
            if entry.is_file() and ext.lower() in ("jpg", "jpeg", "png") and _IMAGE_KEY.match(stem):
                paths[image_number(stem)] = folder / entry.name
        super().__init__(paths)


def read_gqa(
    questions: str | os.PathLike[str], scene_graphs: str | os.PathLike[str]
) -> pl.DataFrame:
    """The questions table of a GQA balanced-questions file whose images all have a scene
    graph in ``scene_graphs``."""
    entries = questions_by_number(read_json(questions, "GQA questions"), questions)
    graphs = read_json(scene_graphs, "GQA scene graphs")
    orphans = sorted(q for q, e in entries.items() if str(e["imageId"]) not in graphs)
    if orphans:
        images = sorted({str(entries[q]["imageId"]) for q in orphans})
        raise ValueError(
            f"{questions}: {len(orphans)} questions (of {len(images)} images) name an image "
            f"without a scene graph in {scene_graphs}, e.g. questions {orphans[:5]}, images "
            f"{images[:5]}; give the scene graphs of the questions' split"
        )
    ids = sorted(entries)
    table = single_answer_questions(
        ids,
        [image_number(entries[q]["imageId"]) for q in ids],
        [str(entries[q]["question"]) for q in ids],
        [str(entries[q]["answer"]) for q in ids],
    )
    detailed = [(entries[q].get("types") or {}).get("detailed") for q in ids]
    return table.with_columns(
        pl.Series("question_type", detailed, pl.String).fill_null(pl.col("question_type"))
    )


def open_gqa(questions: str, scene_graphs: str, images: str | None = None) -> Dataset:
    """GQA's balanced questions, their scene graphs and (optionally) their images."""
    table = read_gqa(questions, scene_graphs)
    describe = {
        "adapter": "gqa",
        "questions": questions,
        "scene_graphs": scene_graphs,
        "images": images,
    }
    source: ImageSource = GqaImages(images) if images else NoImages()
    return Dataset(table, source, describe)

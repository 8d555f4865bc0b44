"""Adapter for VQAv2 in its official layout.

* questions file: ``{"info", "task_type", "data_type", "data_subtype",
  "questions": [{"image_id", "question", "question_id"}]}``;
* annotations file: ``{"annotations": [{"question_id", "image_id", "question_type",
  "answer_type", "multiple_choice_answer", "answers": [{"answer", "answer_confidence",
  "answer_id"}]}]}``;
* COCO images from a folder (``COCO_val2014_000000XXXXXX.jpg``) or straight from the
  ``val2014.zip`` archive.

``question_type`` and ``answer_type`` are the annotations' own. The ten human answers
are kept verbatim; scoring decides how to normalize them (docs/metrics.md).
"""

from __future__ import annotations

import os

import polars as pl

from vqarobust import store
from vqarobust.datasets.prepare import Dataset
from vqarobust.datasets.sources import open_images


def _records(path: str | os.PathLike[str], key: str, fields: list[str]) -> pl.DataFrame:
    """The list under ``key`` of an official VQA JSON file, as a table of ``fields``."""
    try:
        top = pl.read_json(path, infer_schema_length=None)
    except Exception as exc:
        raise ValueError(f"{path}: not a readable JSON file ({exc})") from None
    if key not in top.columns:
        raise ValueError(f"{path}: no {key!r} list at the top level (found {top.columns})")
    rows = top.select(pl.col(key).explode()).unnest(key)
    missing = [f for f in fields if f not in rows.columns]
    if missing:
        raise ValueError(f"{path}: entries of {key!r} lack {missing}")
    rows = rows.select(fields)
    empty = rows.filter(pl.any_horizontal(pl.all().is_null()))
    if empty.height:
        raise ValueError(
            f"{path}: {empty.height} entries of {key!r} lack a value for one of {fields}, "
            f"e.g. {empty.head(3).to_dicts()}"
        )
    return rows


def _few(df: pl.DataFrame, column: str = "question_id") -> list[int]:
    return sorted(df[column].to_list())[:10]


def read_vqav2(
    questions: str | os.PathLike[str], annotations: str | os.PathLike[str]
) -> pl.DataFrame:
    """Pair the official questions and annotations files into one questions table.

    Question ids that appear in only one of the files, or whose image ids disagree,
    raise ``ValueError`` naming a few.
    """
    q = _records(questions, "questions", ["question_id", "image_id", "question"])
    a = _records(
        annotations,
        "annotations",
        ["question_id", "image_id", "question_type", "answer_type", "answers"],
    )
    q = q.with_columns(pl.col("question_id", "image_id").cast(pl.Int64))
    a = a.with_columns(
        pl.col("question_id", "image_id").cast(pl.Int64),
        pl.col("answers").list.eval(pl.element().struct.field("answer").cast(pl.String)),
    )
    only_q = q.join(a, on="question_id", how="anti")
    only_a = a.join(q, on="question_id", how="anti")
    if only_q.height or only_a.height:
        raise ValueError(
            f"questions and annotations do not pair up: {only_q.height} question ids of "
            f"{questions} have no annotation (e.g. {_few(only_q)}), {only_a.height} "
            f"annotations of {annotations} have no question (e.g. {_few(only_a)})"
        )
    paired = q.join(a, on="question_id", how="inner", suffix="_ann")
    clash = paired.filter(pl.col("image_id") != pl.col("image_id_ann"))
    if clash.height:
        raise ValueError(
            f"{clash.height} question ids name different images in the questions and "
            f"annotations files, e.g. {_few(clash)}"
        )
    return paired.select(store.QUESTION_SCHEMA.names)


def open_vqav2(questions: str, annotations: str, images: str) -> Dataset:
    """VQAv2's paired questions and annotations, and its COCO images (folder or zip)."""
    table = read_vqav2(questions, annotations)
    describe = {
        "adapter": "vqav2",
        "questions": questions,
        "annotations": annotations,
        "images": images,
    }
    return Dataset(table, open_images(images), describe)

"""Hugging Face datasets the tests build with the datasets library, from the generated
VQAv2 miniature: the VQAv2 mirrors' layout (an Image column, 10 answers as records, ids
and types), saved with save_to_disk or as Parquet shards in the hub's layout."""

from __future__ import annotations

import json
from pathlib import Path

from vqarobust.datasets.miniature import image_name

SPLIT = "validation"


def vqav2_rows(mini: dict[str, Path], broken: int | None = None) -> dict[str, list]:
    """One row per question with its image's bytes (``broken``: that image id's bytes
    replaced by ones that do not decode)."""
    questions = json.loads(mini["questions"].read_text())["questions"]
    annotations = {
        a["question_id"]: a for a in json.loads(mini["annotations"].read_text())["annotations"]
    }
    fields = (
        "image",
        "question",
        "answers",
        "question_id",
        "image_id",
        "question_type",
        "answer_type",
    )
    rows: dict[str, list] = {k: [] for k in fields}
    for q in questions:
        a = annotations[q["question_id"]]
        data = (mini["images"] / image_name(q["image_id"])).read_bytes()
        if q["image_id"] == broken:
            data = b"\xff\xd8 not really a JPEG"
        rows["image"].append({"bytes": data, "path": None})
        rows["question"].append(q["question"])
        rows["answers"].append(
            [
                {
                    "answer": x["answer"],
                    "answer_confidence": x["answer_confidence"],
                    "answer_id": x["answer_id"],
                }
                for x in a["answers"]
            ]
        )
        rows["question_id"].append(q["question_id"])
        rows["image_id"].append(q["image_id"])
        rows["question_type"].append(a["question_type"])
        rows["answer_type"].append(a["answer_type"])
    return rows


def features():
    import datasets

    record = {
        "answer": datasets.Value("string"),
        "answer_confidence": datasets.Value("string"),
        "answer_id": datasets.Value("int64"),
    }
    return datasets.Features(
        {
            "image": datasets.Image(),
            "question": datasets.Value("string"),
            "answers": [record],
            "question_id": datasets.Value("int64"),
            "image_id": datasets.Value("int64"),
            "question_type": datasets.Value("string"),
            "answer_type": datasets.Value("string"),
        }
    )


def write_saved(rows: dict[str, list], out: Path) -> Path:
    """A DatasetDict with a validation split, written by save_to_disk."""
    import datasets

    ds = datasets.Dataset.from_dict(rows, features=features())
    datasets.DatasetDict({SPLIT: ds}).save_to_disk(str(out))
    return out


def write_parquet(rows: dict[str, list], out: Path, n_shards: int = 2) -> Path:
    """The hub's Parquet layout: data/validation-0000k-of-0000n.parquet."""
    import datasets

    ds = datasets.Dataset.from_dict(rows, features=features())
    (out / "data").mkdir(parents=True)
    for k in range(n_shards):
        ds.shard(n_shards, k, contiguous=True).to_parquet(
            str(out / "data" / f"{SPLIT}-{k:05d}-of-{n_shards:05d}.parquet")
        )
    return out

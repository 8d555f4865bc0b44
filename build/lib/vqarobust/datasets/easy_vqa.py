"""Adapter for easy-VQA (PyPI ``easy-vqa``): 64x64 shape images shipped inside the wheel.

easy-VQA has one answer per question. The questions table repeats it ten times, as if
ten annotators agreed, so that VQA accuracy (docs/metrics.md) is defined (each
leave-one-out subset keeps nine matches) and equals exact-match accuracy.
"""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from vqarobust import store
from vqarobust.datasets.prepare import write_prepared
from vqarobust.datasets.question_types import answer_type, question_type
from vqarobust.datasets.sources import PathImages

SPLITS = ("train", "test")
N_ANNOTATORS = 10


def _load_split(split: str) -> tuple[list[str], list[str], list[int], dict[int, str]]:
    import easy_vqa

    if split == "train":
        qs, answers, image_ids = easy_vqa.get_train_questions()
        paths = easy_vqa.get_train_image_paths()
    elif split == "test":
        qs, answers, image_ids = easy_vqa.get_test_questions()
        paths = easy_vqa.get_test_image_paths()
    else:
        raise ValueError(f"easy-vqa has splits {SPLITS}, not {split!r}")
    return list(qs), list(answers), [int(i) for i in image_ids], dict(paths)


def prepare_easy_vqa(
    questions_out: str | os.PathLike[str],
    images_out: str | os.PathLike[str],
    manifest_out: str | os.PathLike[str],
    info_out: str | os.PathLike[str],
    split: str = "test",
    n_images: int | None = None,
    seed: int = 0,
    shard_bytes: int = store.DEFAULT_SHARD_BYTES,
    manifest: str | None = None,
    on_bad_image: str = "fail",
) -> dict[str, Any]:
    """Write the questions table, image shards, manifest and info of one split's subset.

    Question ids are the position of the question in the split, so they stay stable
    whatever subset is drawn. Returns counts of images and questions written.
    """
    qs, answers, image_ids, paths = _load_split(split)
    questions = pl.DataFrame(
        {
            "question_id": range(len(qs)),
            "image_id": image_ids,
            "question": qs,
            "answers": [[a] * N_ANNOTATORS for a in answers],
            "question_type": [question_type(q) for q in qs],
            "answer_type": [answer_type([a]) for a in answers],
        },
        schema={
            "question_id": pl.Int64,
            "image_id": pl.Int64,
            "question": pl.String,
            "answers": pl.List(pl.String),
            "question_type": pl.String,
            "answer_type": pl.String,
        },  # fmt: skip
    )
    return write_prepared(
        questions,
        PathImages(paths),
        questions_out=questions_out,
        images_out=images_out,
        manifest_out=manifest_out,
        info_out=info_out,
        n_images=n_images,
        seed=seed,
        manifest=manifest,
        on_bad_image=on_bad_image,
        shard_bytes=shard_bytes,
        describe={"adapter": "easy-vqa", "split": split},
    )

"""Adapter for easy-VQA (PyPI ``easy-vqa``): 64x64 shape images shipped inside the wheel.

easy-VQA has one answer per question. The questions table repeats it ten times, as if
ten annotators agreed, so that the VQA accuracy of SPEC section 3 is defined (each
leave-one-out subset keeps nine matches) and equals exact-match accuracy.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from vqarobust import store
from vqarobust.datasets.question_types import question_type

log = logging.getLogger(__name__)

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


def select_images(image_ids: list[int], n_images: int | None, seed: int) -> list[int]:
    """A seeded subset of ``n_images`` distinct image ids (all when None), sorted."""
    unique = np.unique(np.asarray(image_ids, dtype=np.int64))
    if n_images is None or n_images >= len(unique):
        return unique.tolist()
    if n_images <= 0:
        raise ValueError(f"n_images must be positive, got {n_images}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(unique, size=n_images, replace=False)).tolist()


def prepare_easy_vqa(
    questions_out: str | os.PathLike[str],
    images_out: str | os.PathLike[str],
    split: str = "test",
    n_images: int | None = None,
    seed: int = 0,
    shard_bytes: int = store.DEFAULT_SHARD_BYTES,
) -> dict[str, int]:
    """Write the questions table and image shards for a seeded subset of one split.

    Question ids are the position of the question in the split, so they stay stable
    whatever subset is drawn. Returns counts of images and questions written.
    """
    qs, answers, image_ids, paths = _load_split(split)
    keep = set(select_images(image_ids, n_images, seed))
    rows = [
        {
            "question_id": qid,
            "image_id": img,
            "question": q,
            "answers": [a] * N_ANNOTATORS,
            "question_type": question_type(q),
        }
        for qid, (q, a, img) in enumerate(zip(qs, answers, image_ids, strict=True))
        if img in keep
    ]
    missing = sorted(i for i in keep if i not in paths)
    if missing:
        raise FileNotFoundError(f"easy-vqa {split}: no image file for ids {missing[:10]}")

    def image_rows():
        for image_id in sorted(keep):
            path = Path(paths[image_id])
            data = path.read_bytes()
            try:
                fmt, width, height = store.image_info(data, verify=True)
            except Exception as exc:
                raise ValueError(
                    f"easy-vqa {split}: image {image_id} ({path}) does not decode"
                ) from exc
            yield {
                "image_id": image_id,
                "bytes": data,
                "format": fmt,
                "width": width,
                "height": height,
            }

    n_written = store.write_image_shards(image_rows(), images_out, shard_bytes)
    store.write_table(pa.Table.from_pylist(rows, schema=store.QUESTION_SCHEMA), questions_out)
    log.info("easy-vqa %s: %d images, %d questions", split, n_written, len(rows))
    return {"images": n_written, "questions": len(rows)}

"""Make the feature table of one split (or one corrupted image folder) of scenes."""

from __future__ import annotations

import logging
import os

from vqarobust import store

log = logging.getLogger(__name__)


def extract_features(
    out_path: str | os.PathLike[str],
    kind: str,
    images: str | None = None,
    detector: str | None = None,
    questions: str | None = None,
    word_vectors_path: str | None = None,
    scene_seed: int = 0,
    split: str = "test",
    threads: int = 1,
) -> int:
    """Write the feature table: ``detector`` encodes the objects' crops of ``images``;
    ``perfect_sight`` encodes the scene-graph labels of the images ``questions`` asks
    about. Returns the number of objects."""
    if kind == "detector":
        from vqarobust.features.detector import extract_detector_features

        if images is None or detector is None:
            raise ValueError("detector features need the images and the trained detector")
        return extract_detector_features(images, detector, out_path, scene_seed, split, threads)
    if kind == "perfect_sight":
        from vqarobust.features import scenes as scene_features
        from vqarobust.features.perfect_sight import perfect_sight_table
        from vqarobust.features.table import write_features
        from vqarobust.features.word_vectors import word_vectors

        if questions is None:
            raise ValueError("perfect-sight features need the split's questions")
        image_ids = store.read_questions(questions).column("image_id").unique().to_pylist()
        classes, attributes = scene_features.names()
        vocab = word_vectors([*classes, *attributes], word_vectors_path)
        rows = scene_features.object_rows(scene_seed, split, image_ids)
        write_features(perfect_sight_table(rows, vocab), out_path, {"kind": kind}, vocab)
        log.info("perfect sight: %d objects of %d images", len(rows), len(image_ids))
        return len(rows)
    raise ValueError(f"unknown feature kind {kind!r}")

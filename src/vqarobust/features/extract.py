"""Make the feature table of one split (or one corrupted image folder).

Scenes: detector-like features of the objects' crops, or perfect sight from the
generated scene graphs. GQA: released detections (gqa_h5, obj36) matched to the scene
graphs, or perfect sight from the scene graphs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vqarobust import store

log = logging.getLogger(__name__)


def _image_ids(questions: str | None, kind: str) -> list[int]:
    if questions is None:
        raise ValueError(f"{kind} features need the split's questions")
    return sorted(store.read_questions(questions).column("image_id").unique().to_pylist())


# Where a clean split's table (the donor bank of its feature swaps) takes its images from:
# ``split`` every image of the split (the SwapMix paper's "another object in the dataset"),
# ``sample`` only those its questions ask about (the earlier rule).
DONORS = ("split", "sample")


def _check_donors(donors: str) -> None:
    if donors not in DONORS:
        raise ValueError(f"donors is one of {DONORS}, not {donors!r}")


def extract_gqa_features(
    out_path: str | os.PathLike[str],
    kind: str,
    questions: str | None,
    scene_graphs: str | None,
    released: Mapping[str, Any] | None = None,
    word_vectors_path: str | None = None,
    donors: str = "sample",
) -> int:
    """The feature table of the images GQA ``questions`` ask about: released detections
    (``released``: the source's file keys) matched to ``scene_graphs``, or perfect sight.
    With ``donors="split"`` the table also holds every other image of the scene graphs
    (released features: those the feature file holds, the others counted), the bank of
    the feature swaps."""
    from vqarobust.datasets.gqa import image_number, read_json
    from vqarobust.features import gqa
    from vqarobust.features.table import write_features

    _check_donors(donors)
    if scene_graphs is None:
        raise ValueError(f"{kind} features of GQA need its scene graphs")
    image_ids = _image_ids(questions, kind)
    graphs = read_json(scene_graphs, "GQA scene graphs")
    every = sorted(image_number(key) for key in graphs) if donors == "split" else []
    if kind == "perfect_sight":
        from vqarobust.features.perfect_sight import perfect_sight_table
        from vqarobust.features.word_vectors import word_vectors

        bank = sorted({*image_ids, *every})
        vocab = word_vectors(gqa.label_names(graphs, bank), word_vectors_path)
        rows = gqa.graph_rows(graphs, bank)
        info = {"kind": kind, "images": len(bank), "question_images": len(image_ids)}
        write_features(perfect_sight_table(rows, vocab), out_path, info, vocab)
        counts = len(rows), len(bank), len(image_ids)
        log.info("perfect sight (GQA): %d objects of %d images (%d asked about)", *counts)
        return len(rows)
    if kind not in gqa.RELEASED_KINDS:
        raise ValueError(
            f"GQA reads feature kinds perfect_sight, {', '.join(gqa.RELEASED_KINDS)}, not {kind!r}"
        )
    table, counts = gqa.released_table(kind, released or {}, graphs, image_ids, every)
    write_features(table, out_path, {"kind": kind, "question_images": len(image_ids), **counts})
    return counts["detections"]


@dataclass(frozen=True)
class FeatureInputs:
    """The files a feature table is made from, each only where its kind reads it: the
    split's ``images`` and the trained ``detector`` (detector features), the split's
    ``questions`` (perfect sight, and every GQA kind), the ``word_vectors`` (perfect
    sight), GQA's ``scene_graphs`` and a released source's files (``released``: gqa_h5's
    ``info`` and ``folder``, obj36's ``path``)."""

    images: str | None = None
    detector: str | None = None
    questions: str | None = None
    word_vectors: str | None = None
    scene_graphs: str | None = None
    released: Mapping[str, Any] | None = None


NO_INPUTS = FeatureInputs()


def extract_features(
    out_path: str | os.PathLike[str],
    kind: str,
    inputs: FeatureInputs = NO_INPUTS,
    scene_seed: int = 0,
    split: str = "test",
    threads: int = 1,
    adapter: str = "scenes",
    donors: str = "sample",
) -> int:
    """Write the feature table: on scenes, ``detector`` encodes the objects' crops of
    the ``inputs`` images and ``perfect_sight`` encodes the scene-graph labels of the
    images its questions ask about; on GQA see :func:`extract_gqa_features`. With
    ``donors="split"`` (a clean split's table: the donor bank of its feature swaps) the
    table also holds every other scene of the split, a detector's crops of them taken
    from the scenes rendered from their graphs. Returns the number of rows."""
    questions, word_vectors_path = inputs.questions, inputs.word_vectors
    _check_donors(donors)
    if adapter == "gqa":
        return extract_gqa_features(
            out_path,
            kind,
            questions,
            inputs.scene_graphs,
            inputs.released,
            word_vectors_path,
            donors,
        )
    from vqarobust.datasets.scenes import SPLITS

    every = range(SPLITS[split]) if donors == "split" else range(0)
    if kind == "detector":
        from vqarobust.features.detector import extract_detector_features

        if inputs.images is None or inputs.detector is None:
            raise ValueError("detector features need the images and the trained detector")
        return extract_detector_features(
            inputs.images, inputs.detector, out_path, scene_seed, split, threads, rendered=every
        )
    if kind == "perfect_sight":
        from vqarobust.features import scenes as scene_features
        from vqarobust.features.perfect_sight import perfect_sight_table
        from vqarobust.features.table import write_features
        from vqarobust.features.word_vectors import word_vectors

        image_ids = _image_ids(questions, kind)
        bank = sorted({*image_ids, *every})
        classes, attributes = scene_features.names()
        vocab = word_vectors([*classes, *attributes], word_vectors_path)
        rows = scene_features.object_rows(scene_seed, split, bank)
        info = {"kind": kind, "images": len(bank), "question_images": len(image_ids)}
        write_features(perfect_sight_table(rows, vocab), out_path, info, vocab)
        counts = len(rows), len(bank), len(image_ids)
        log.info("perfect sight: %d objects of %d images (%d asked about)", *counts)
        return len(rows)
    raise ValueError(f"unknown feature kind {kind!r}")

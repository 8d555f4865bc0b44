"""Materialize the feature-level SwapMix subsets of one feature source: the swap table
and one question set per context perturbation (every swap index in one file)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

from vqarobust import store
from vqarobust.context.feature_swaps import (
    FEATURE_SWAP_SCHEMA,
    THRESHOLD,
    FeatureSwapPlanner,
    QuestionContext,
    describe,
)
from vqarobust.datasets import scenes
from vqarobust.features.table import FeatureTable
from vqarobust.features.word_vectors import word_vectors
from vqarobust.materialize.context import VariantIds, write_swap_outputs

log = logging.getLogger(__name__)


def scenes_contexts(questions: object, scene_seed: int, split: str) -> list[QuestionContext]:
    """The context of each scenes question: the rows (object ids) it does not depend on,
    and the shapes and colours it mentions."""
    image_ids = sorted(set(questions.column("image_id").to_pylist()))
    index = scenes.question_index(scene_seed, split, image_ids)
    out = []
    for qid, text in zip(questions.column("question_id").to_pylist(),
                         questions.column("question").to_pylist(), strict=True):  # fmt: skip
        if qid not in index or index[qid][1].text != text:
            raise ValueError(
                f"question {qid} is not a question of scenes {split} (scene_seed {scene_seed}); "
                "was the dataset prepared with another seed or split?"
            )
        objects, q = index[qid]
        context = tuple(o.id for o in scenes.context_objects(objects, q))
        out.append(QuestionContext(qid, qid // scenes.ID_STRIDE, context,
                                   frozenset(q.shapes), frozenset(q.colours)))  # fmt: skip
    return out


def plan_feature_swaps(
    contexts: Sequence[QuestionContext],
    bank: FeatureTable,
    perturbations: Sequence[str],
    k: int,
    seed: int,
    mode: str,
    word_vectors_path: str | None = None,
    threshold: float = THRESHOLD,
) -> list[dict]:
    """Rows of FEATURE_SWAP_SCHEMA for every swap of every question (severity = the
    index of the question's swap of that kind); identical swaps of one image share one
    swapped feature set id."""
    classes = sorted({c for c in bank.classes if c is not None})
    planner = FeatureSwapPlanner(bank, word_vectors(classes, word_vectors_path), k, seed, mode,
                                 threshold)  # fmt: skip
    ids = VariantIds()
    rows = []
    for q in sorted(contexts, key=lambda c: c.question_id):
        counters = dict.fromkeys(perturbations, 0)
        labels = bank.labels(q.image_id)
        for sw in planner.swaps(q, perturbations):
            counters[sw.perturbation] += 1
            cls, attrs, _ = labels[sw.object_index]
            rows.append({
                "question_id": q.question_id, "perturbation": sw.perturbation,
                "severity": counters[sw.perturbation], "rank": sw.rank,
                "image_id": ids.get(q.image_id, sw.key()), "source_image_id": q.image_id,
                "object_index": sw.object_index,
                "donor_image_id": sw.donor[0] if sw.donor else None,
                "donor_object_index": sw.donor[1] if sw.donor else None,
                "after_class": sw.after_class, "after_attributes": list(sw.after_attributes),
                "before": describe(cls, attrs),
                "after": describe(sw.after_class, sw.after_attributes),
            })  # fmt: skip
    return rows


def swap_features(
    questions_path: str | os.PathLike[str],
    features_path: str | os.PathLike[str],
    swaps_out: str | os.PathLike[str],
    sets_out: Mapping[str, str | os.PathLike[str]],
    mode: str,
    seed: int = 0,
    k: int = 3,
    threshold: float = THRESHOLD,
    word_vectors_path: str | None = None,
    scene_seed: int = 0,
    split: str = "test",
) -> dict[str, int]:
    """Write the feature swap table and one question set per perturbation (``sets_out``:
    perturbation -> path) for a scenes dataset's feature source. Returns counts."""
    questions = store.read_questions(questions_path)
    bank = FeatureTable.read(features_path)
    contexts = scenes_contexts(questions, scene_seed, split)
    rows = plan_feature_swaps(contexts, bank, list(sets_out), k, seed, mode, word_vectors_path,
                              threshold)  # fmt: skip
    counts = write_swap_outputs(questions, rows, 0, swaps_out, sets_out, FEATURE_SWAP_SCHEMA)
    log.info("feature swaps (%s): %s", mode, counts)
    return counts

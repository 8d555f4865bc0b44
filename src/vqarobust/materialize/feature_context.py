"""Materialize the feature-level SwapMix subsets of one feature source: the swap table
and one question set per context perturbation (every swap index in one file)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
from vqarobust.materialize.context import SwapOutputs, VariantIds, write_swap_outputs

log = logging.getLogger(__name__)


def scenes_contexts(questions: object, scene_seed: int, split: str) -> list[QuestionContext]:
    """The context of each scenes question: the rows (object ids) it does not depend on,
    and the shapes and colours it mentions."""
    image_ids = sorted(set(questions.column("image_id").to_pylist()))
    index = scenes.question_index(scene_seed, split, image_ids)
    out = []
    for qid, text in zip(
        questions.column("question_id").to_pylist(),
        questions.column("question").to_pylist(),
        strict=True,
    ):
        if qid not in index or index[qid][1].text != text:
            raise ValueError(
                f"question {qid} is not a question of scenes {split} (scene_seed {scene_seed}); "
                "was the dataset prepared with another seed or split?"
            )
        objects, q = index[qid]
        context = tuple(o.id for o in scenes.context_objects(objects, q))
        out.append(
            QuestionContext(
                qid, qid // scenes.ID_STRIDE, context, frozenset(q.shapes), frozenset(q.colours)
            )
        )
    return out


def gqa_contexts(
    questions: object,
    entries: Mapping[int, Mapping],
    graphs: Mapping[str, Mapping],
    bank: FeatureTable,
) -> list[QuestionContext]:
    """The context of each GQA question: the rows of its image whose scene-graph object
    (matched, for released detections) its reasoning steps and annotations do not select.
    Unmatched rows are left alone. The classes and attributes of the selected objects, and
    those the question names ("Is there a bird?" selects no object), are never swapped
    in: a swap must not make a second object the question is about."""
    from vqarobust.datasets.gqa import image_key
    from vqarobust.datasets.gqa_graphs import mentioned_names, name_index, relevant_objects

    classes = {c for c in bank.classes if c is not None}
    attributes = {a for attrs in bank.attributes for a in attrs}
    names = name_index(classes | attributes)
    out, unknown = [], 0
    columns = [questions.column(c).to_pylist() for c in ("question_id", "image_id", "question")]
    for qid, image_id, text in zip(*columns, strict=True):
        if qid not in entries:
            raise ValueError(f"question {qid} is not in the GQA questions file")
        if image_id not in bank:
            raise KeyError(f"question {qid}: image {image_key(image_id)} has no features")
        objects = (graphs.get(image_key(image_id)) or {}).get("objects") or {}
        relevant = relevant_objects(entries[qid])
        unknown += len(relevant - set(objects))
        known = [objects[o] for o in relevant if o in objects]
        context = tuple(
            i
            for i, (_, _, oid) in enumerate(bank.labels(image_id))
            if oid is not None and oid not in relevant
        )
        said = mentioned_names(text, names)
        out.append(
            QuestionContext(
                qid,
                image_id,
                context,
                frozenset({str(o["name"]) for o in known} | (said & classes)),
                frozenset(
                    {str(a) for o in known for a in o.get("attributes") or ()} | (said & attributes)
                ),
            )
        )
    if unknown:
        log.warning(
            "GQA: %d object ids named by questions' reasoning steps or annotations are "
            "not in their image's scene graph (ignored)",
            unknown,
        )
    return out


def plan_feature_swaps(
    contexts: Sequence[QuestionContext],
    bank: FeatureTable,
    perturbations: Sequence[str],
    settings: FeatureSwapSettings,
    word_vectors_path: str | None = None,
) -> list[dict]:
    """Rows of FEATURE_SWAP_SCHEMA for every swap of every question (severity = the
    index of the question's swap of that kind), planned with ``settings`` (mode, seed,
    k, threshold, class_attributes, max_objects); identical swaps of one image share one swapped
    feature set id."""
    s = settings
    classes = sorted({c for c in bank.classes if c is not None})
    planner = FeatureSwapPlanner(
        bank,
        word_vectors(classes, word_vectors_path),
        s.k,
        s.seed,
        s.mode,
        s.threshold,
        s.max_objects,
        s.class_attributes,
        s.attribute_swaps,
    )
    counts = (sum(c is not None for c in bank.classes), len(bank.rows), len(classes))
    asked = len({q.image_id for q in contexts})
    log.info("donor bank: %d labelled objects of %d images, %d classes", *counts)
    log.info("the questions ask about %d of the bank's images", asked)
    ids = VariantIds()
    rows = []
    for q in sorted(contexts, key=lambda c: c.question_id):
        counters = dict.fromkeys(perturbations, 0)
        labels = bank.labels(q.image_id)
        for sw in planner.swaps(q, perturbations):
            counters[sw.perturbation] += 1
            cls, attrs, _ = labels[sw.object_index]
            rows.append(
                {
                    "question_id": q.question_id,
                    "perturbation": sw.perturbation,
                    "severity": counters[sw.perturbation],
                    "rank": sw.rank,
                    "image_id": ids.get(q.image_id, sw.key()),
                    "source_image_id": q.image_id,
                    "object_index": sw.object_index,
                    "donor_image_id": sw.donor[0] if sw.donor else None,
                    "donor_object_index": sw.donor[1] if sw.donor else None,
                    "after_class": sw.after_class,
                    "after_attributes": list(sw.after_attributes),
                    "before": describe(cls, attrs),
                    "after": describe(sw.after_class, sw.after_attributes),
                }
            )
    if planner.skipped_class_swaps:
        log.info(
            "%d class swaps left out: every object of the new class carries an attribute "
            "its question names",
            planner.skipped_class_swaps,
        )
    return rows


@dataclass(frozen=True)
class FeatureSwapSettings:
    """What changes the feature swaps of one source: ``mode`` (donor rows, or perfect
    sight's label re-encoding), the seed, ``k`` swaps per kind, the class similarity
    ``threshold``, what a class swap's new object looks like (``class_attributes``:
    ``paper`` or ``same``, :data:`vqarobust.context.feature_swaps.CLASS_ATTRIBUTES`), how
    a donor attribute swap draws (``attribute_swaps``: ``objects``, the paper's text, or
    ``sets``, :data:`vqarobust.context.feature_swaps.ATTRIBUTE_SWAPS`), the
    context objects swapped per question (``max_objects``: the first that many, every one
    when None), and where the questions' objects come from (``adapter``: scenes, regenerated from
    ``scene_seed`` and ``split``, or gqa's scene graphs)."""

    mode: str
    seed: int = 0
    k: int = 3
    threshold: float = THRESHOLD
    class_attributes: str = "paper"
    attribute_swaps: str = "objects"
    max_objects: int | None = None
    scene_seed: int = 0
    split: str = "test"
    adapter: str = "scenes"


def swap_features(
    questions_path: str | os.PathLike[str],
    features_path: str | os.PathLike[str],
    out: SwapOutputs,
    settings: FeatureSwapSettings,
    word_vectors_path: str | None = None,
    gqa_questions: str | os.PathLike[str] | None = None,
    scene_graphs: str | os.PathLike[str] | None = None,
) -> dict[str, int]:
    """Write the feature swap table and the question sets of ``out`` for a feature
    source of scenes or of GQA (``gqa_questions`` and ``scene_graphs``: the dataset's
    files, for the questions' relevant objects). Returns counts."""
    s = settings
    questions = store.read_questions(questions_path)
    bank = FeatureTable.read(features_path)
    if s.adapter == "gqa":
        from vqarobust.datasets.gqa import questions_by_number, read_json

        if gqa_questions is None or scene_graphs is None:
            raise ValueError("GQA feature swaps need the questions and scene graphs files")
        entries = questions_by_number(read_json(gqa_questions, "GQA questions"), gqa_questions)
        graphs = read_json(scene_graphs, "GQA scene graphs")
        contexts = gqa_contexts(questions, entries, graphs, bank)
    else:
        contexts = scenes_contexts(questions, s.scene_seed, s.split)
    rows = plan_feature_swaps(contexts, bank, list(out.sets), s, word_vectors_path)
    counts = write_swap_outputs(questions, rows, 0, out, FEATURE_SWAP_SCHEMA)
    log.info("feature swaps (%s): %s", s.mode, counts)
    return counts

"""Materialize the SwapMix context subsets of a scenes dataset: swapped images, the
question set of each context perturbation, and a table of every swap."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vqarobust import store
from vqarobust.context.swapmix import Swap, class_neighbours, describe, scene_swaps
from vqarobust.datasets import scenes
from vqarobust.seeding import item_rng

log = logging.getLogger(__name__)

# Swapped images of one source image get ids image_id * VARIANTS + n. Every context
# object of a GQA image swapped for each of its ~12 questions (context.max_objects null)
# makes thousands of variants per image; GQA's largest ids (about 1.6e9) times this
# stay far inside int64.
VARIANTS = 1_000_000

SWAP_SCHEMA = pa.schema(
    [
        ("question_id", pa.int64()),
        ("perturbation", pa.string()),
        ("severity", store.SEVERITY),
        ("rank", pa.int8()),  # among the object's swaps of this kind (1..k)
        ("image_id", pa.int64()),  # the swapped image
        ("source_image_id", pa.int64()),
        ("object_id", pa.int64()),  # scenes object ids; COCO instance ids pass int32
        ("before", pa.string()),  # "small red circle"
        ("after", pa.string()),
    ]
)


class VariantIds:
    """Ids of swapped images: image_id * VARIANTS + n, one per distinct swap of an image,
    so identical swaps asked by several questions share one image."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}
        self._count: dict[int, int] = {}

    def get(self, image_id: int, swap: tuple) -> int:
        """The id of ``image_id`` with ``swap`` made (a new one for a new swap)."""
        key = (image_id, swap)
        if key not in self._ids:
            n = self._count.get(image_id, 0)
            if n >= VARIANTS:
                raise ValueError(f"image {image_id}: more than {VARIANTS} swapped images")
            self._count[image_id] = n + 1
            self._ids[key] = image_id * VARIANTS + n
        return self._ids[key]


def shape_neighbours(encoder_path: str | None = None) -> dict[str, list[str]]:
    """Per scenes shape, the other shapes by MiniLM similarity of their names."""
    from vqarobust.text import encoder

    return class_neighbours(scenes.SHAPES, encoder.encode(list(scenes.SHAPES), encoder_path))


def plan_swaps(
    questions: pa.Table,
    seed: int,
    scene_seed: int,
    split: str,
    k: int,
    perturbations: Sequence[str],
    neighbours: Mapping[str, list[str]],
    max_objects: int | None = None,
) -> tuple[list[dict], dict[int, tuple[int, Swap]]]:
    """Every swap of every question (rows of SWAP_SCHEMA) and, per swapped-image id, the
    source image and the swap that makes it. Attribute swaps are drawn per question from
    (seed, question id); identical swaps of one image share one swapped image."""
    image_ids = sorted(set(questions.column("image_id").to_pylist()))
    index = scenes.question_index(scene_seed, split, image_ids)
    texts = dict(
        zip(
            questions.column("question_id").to_pylist(),
            questions.column("question").to_pylist(),
            strict=True,
        )
    )
    ids = VariantIds()
    made: dict[int, tuple[int, Swap]] = {}
    rows = []
    for qid in sorted(texts):
        if qid not in index or index[qid][1].text != texts[qid]:
            raise ValueError(
                f"question {qid} is not a question of scenes {split} (scene_seed {scene_seed}); "
                "was the dataset prepared with another seed or split?"
            )
        objects, question = index[qid]
        image_id = qid // scenes.ID_STRIDE
        rng = item_rng(seed, "swapmix", qid)
        for sw in scene_swaps(objects, question, dict(neighbours), k, rng, max_objects):
            if sw.perturbation not in perturbations:
                continue
            vid = ids.get(image_id, (sw.object_id, sw.changes))
            made.setdefault(vid, (image_id, sw))
            before = objects[sw.object_id]
            after = sw.apply(objects)[sw.object_id]
            rows.append(
                {
                    "question_id": qid,
                    "perturbation": sw.perturbation,
                    "severity": sw.severity,
                    "rank": sw.rank,
                    "image_id": vid,
                    "source_image_id": image_id,
                    "object_id": sw.object_id,
                    "before": describe(before),
                    "after": describe(after),
                }
            )
    return rows, made


@dataclass(frozen=True)
class SwapOutputs:
    """Where a swap job writes: the swap table, one question set per perturbation
    (``sets``: perturbation -> path; QUESTION_SET_SCHEMA, every severity, only the
    questions that have a swap of that severity) and, for swaps in pixels, the swapped
    images."""

    swaps: str | os.PathLike[str]
    sets: Mapping[str, str | os.PathLike[str]]
    images: str | os.PathLike[str] | None = None

    def image_folder(self) -> str | os.PathLike[str]:
        """The swapped images' folder (swaps in pixels write one)."""
        if self.images is None:
            raise ValueError("swaps in pixels write images: SwapOutputs.images is missing")
        return self.images


@dataclass(frozen=True)
class SwapSettings:
    """What changes a question's swaps in pixels, on scenes and COCO images alike: the
    seed, ``k`` swaps of each kind per object, and the context objects swapped per
    question (``max_objects``: the first that many, every one when None, the paper's
    rule)."""

    seed: int = 0
    k: int = 3
    max_objects: int | None = None


def swap_context(
    questions_path: str | os.PathLike[str],
    out: SwapOutputs,
    settings: SwapSettings = SwapSettings(),
    scene_seed: int = 0,
    split: str = "test",
    encoder_path: str | None = None,
    shard_bytes: int = store.DEFAULT_SHARD_BYTES,
) -> dict[str, int]:
    """Write the swapped images, the swap table and the question sets of ``out``.
    Returns counts."""
    s = settings
    questions = store.read_questions(questions_path)
    rows, made = plan_swaps(
        questions,
        s.seed,
        scene_seed,
        split,
        s.k,
        list(out.sets),
        shape_neighbours(encoder_path),
        s.max_objects,
    )

    def images() -> Iterator[dict]:
        graphs: dict[int, list[scenes.SceneObject]] = {}
        for vid in sorted(made):
            image_id, sw = made[vid]
            objects = graphs.setdefault(image_id, scenes.scene(scene_seed, split, image_id))
            yield {
                "image_id": vid,
                "bytes": scenes.png(scenes.render(sw.apply(objects))),
                "format": "png",
                "width": scenes.SIDE,
                "height": scenes.SIDE,
            }

    n_images = store.write_image_shards(images(), out.image_folder(), shard_bytes)
    return write_swap_outputs(questions, rows, n_images, out)


def write_swap_outputs(
    questions: pa.Table,
    rows: list[dict],
    n_images: int,
    out: SwapOutputs,
    schema: pa.Schema = SWAP_SCHEMA,
) -> dict[str, int]:
    """The swap table (``schema``) and one question set per perturbation; returns counts."""
    table = pa.Table.from_pylist(rows, schema=schema)
    store.write_table(table, out.swaps)
    texts = dict(
        zip(
            questions.column("question_id").to_pylist(),
            questions.column("question").to_pylist(),
            strict=True,
        )
    )
    counts = {"swapped_images": n_images, "swaps": table.num_rows}
    for perturbation, path in out.sets.items():
        mine = [r for r in rows if r["perturbation"] == perturbation]
        qs = [texts[r["question_id"]] for r in mine]
        store.write_table(
            pa.table(
                {
                    "question_id": [r["question_id"] for r in mine],
                    "image_id": [r["image_id"] for r in mine],
                    "original": qs,
                    "perturbed": qs,
                    "perturbation": [perturbation] * len(mine),
                    "severity": [r["severity"] for r in mine],
                    "changed": [True] * len(mine),
                    "similarity": [1.0] * len(mine),
                    "tries": [1] * len(mine),
                },
                schema=store.QUESTION_SET_SCHEMA,
            ),
            path,
        )
        counts[perturbation] = len(mine)
    log.info("context swaps: %s", counts)
    return counts


@dataclass(frozen=True)
class CocoSources:
    """What swaps on COCO images read: the prepared clean shards (``clean``, the target
    images), the dataset's image folder or zip (``images``, the donors) and the COCO
    instance annotations (``instances``)."""

    clean: str | os.PathLike[str]
    images: str | os.PathLike[str]
    instances: str | os.PathLike[str]


def swap_context_coco(
    questions_path: str | os.PathLike[str],
    sources: CocoSources,
    out: SwapOutputs,
    settings: SwapSettings = SwapSettings(),
    min_area: float = 1024.0,
    encoder_path: str | None = None,
    storage: store.ImageStorage = store.DEFAULT_STORAGE,
) -> dict[str, int]:
    """The context subsets of a COCO-image dataset (VQAv2): swaps from the COCO instance
    annotations (:mod:`vqarobust.context.coco`), pasted in image space into the clean
    targets from the donors of ``sources``, stored as ``storage`` says. Writes the same
    outputs as :func:`swap_context`."""
    from vqarobust.context import coco
    from vqarobust.datasets.sources import open_images
    from vqarobust.text import encoder

    questions = store.read_questions(questions_path)
    by_image, categories = coco.read_instances(sources.instances)
    neighbours = class_neighbours(categories, encoder.encode(categories, encoder_path))
    donors = coco.donor_pool(by_image, min_area)
    rows: list[dict] = []
    made: dict[int, coco.CocoSwap] = {}
    ids = VariantIds()
    no_instances = set()
    for q in questions.select(["question_id", "image_id", "question", "answers"]).to_pylist():
        image_id = q["image_id"]
        if image_id not in by_image:
            no_instances.add(image_id)
            continue
        mentioned = coco.mentioned_categories([q["question"], *q["answers"]], categories)
        rng = item_rng(settings.seed, "swapmix", q["question_id"])
        for sw in coco.coco_swaps(
            by_image[image_id],
            mentioned,
            neighbours,
            donors,
            settings.k,
            rng,
            min_area,
            settings.max_objects,
        ):
            if sw.perturbation not in out.sets:
                continue
            vid = ids.get(image_id, (sw.target.id, sw.donor.id))
            made.setdefault(vid, sw)
            rows.append(
                {
                    "question_id": q["question_id"],
                    "perturbation": sw.perturbation,
                    "severity": sw.severity,
                    "rank": sw.rank,
                    "image_id": vid,
                    "source_image_id": image_id,
                    "object_id": sw.target.id,
                    "before": sw.target.category,
                    "after": f"{sw.donor.category} (instance {sw.donor.id})",
                }
            )
    if no_instances:
        log.warning(
            "%d images have no COCO instance annotations: their questions get no swaps (e.g. %s)",
            len(no_instances),
            sorted(no_instances)[:5],
        )

    def images() -> Iterator[dict]:
        clean = store.ImageShards(sources.clean)
        with open_images(sources.images) as source:
            for vid, sw in sorted(made.items()):
                target = coco.decode(clean.read([sw.target.image_id])[sw.target.image_id])
                donor = coco.decode(source.read(sw.donor.image_id))
                pasted = np.asarray(coco.paste(target, sw.target.box, donor, sw.donor.box))
                yield {
                    "image_id": vid,
                    "bytes": storage.encode(pasted),
                    "format": storage.image_format,
                    "width": pasted.shape[1],
                    "height": pasted.shape[0],
                }

    n_images = store.write_image_shards(images(), out.image_folder(), storage.shard_bytes)
    return write_swap_outputs(questions, rows, n_images, out)

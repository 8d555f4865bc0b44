"""Where a dataset's objects are, and which of them its questions depend on: the boxes
that ``object_crop`` keeps in frame and ``occlude_context`` leaves uncovered.

Three sources give boxes, each with its own rule for a *relevant* object:

* scenes: the scene graph (exact boxes); the objects a question depends on
  (``SceneQuestion.depends``);
* VQAv2: COCO's instance annotations (config ``context.instances``); the instances of a
  category the question or one of its answers names
  (:func:`vqarobust.context.coco.mentioned_categories`, SwapMix-on-COCO's rule);
* GQA: the scene graphs; the objects the question's reasoning steps and annotations
  select (:func:`vqarobust.datasets.gqa_graphs.relevant_objects`).

An image is corrupted once for all its questions, so an object is relevant when any
question of the eval split about its image depends on it: every question's objects are
kept, and an object only one question needs is kept for all. Relevance is only as good
as the annotations: what COCO does not annotate (sky, grass, walls) is never kept.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

# One row per annotated object of an image with at least one eval question; an image
# without rows has no box data. Boxes are pixels of the stored image, (x0, y0) inclusive
# and (x1, y1) exclusive as floats.
BOX_SCHEMA = pa.schema(
    [
        ("image_id", pa.int64()),
        ("object_id", pa.string()),  # scenes' index, COCO's instance id, GQA's object id
        ("x0", pa.float32()),
        ("y0", pa.float32()),
        ("x1", pa.float32()),
        ("y1", pa.float32()),
        ("relevant", pa.bool_()),  # some eval question of the image depends on it
    ]
)

SOURCES = ("scenes", "vqav2", "gqa")  # the dataset adapters with boxes


def _table(rows: Iterable[tuple[int, str, tuple[float, ...], bool]]) -> pa.Table:
    rows = sorted(rows, key=lambda r: (r[0], r[1]))
    boxes = np.asarray([r[2] for r in rows], np.float32).reshape(-1, 4)
    return pa.table(
        {
            "image_id": pa.array([r[0] for r in rows], pa.int64()),
            "object_id": pa.array([r[1] for r in rows], pa.string()),
            **{k: pa.array(boxes[:, i]) for i, k in enumerate(("x0", "y0", "x1", "y1"))},
            "relevant": pa.array([r[3] for r in rows], pa.bool_()),
        },
        schema=BOX_SCHEMA,
    )


def _by_image(questions: pa.Table) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for q in questions.to_pylist():
        out.setdefault(int(q["image_id"]), []).append(q)
    return out


def scenes_boxes(questions: pa.Table, scene_seed: int, split: str) -> pa.Table:
    """Boxes of the scenes images of ``questions``, relevant where a question depends on
    the object. A question id that is not one of the scene's own is an error."""
    from vqarobust.datasets import scenes

    rows = []
    for image_id, asked in _by_image(questions).items():
        objects = scenes.scene(scene_seed, split, image_id)
        own = {q.question_id: q for q in scenes.questions(scene_seed, split, image_id, objects)}
        stray = [q["question_id"] for q in asked if q["question_id"] not in own]
        if stray:
            raise ValueError(
                f"questions {stray[:5]} are not scenes questions of image "
                f"{image_id} (scene_seed {scene_seed}, split {split})"
            )
        depends = {i for q in asked for i in own[q["question_id"]].depends}
        rows += [(image_id, str(o.id), o.box, o.id in depends) for o in objects]
    return _table(rows)


def coco_boxes(questions: pa.Table, instances: str | os.PathLike[str]) -> pa.Table:
    """Boxes of COCO's instances on the images of ``questions`` (crowd regions and
    small instances too: keeping them is what matters), relevant where a question or
    its answers name the category. Images without instances get no rows (logged)."""
    from vqarobust.context import coco

    by_image, categories = coco.read_instances(instances)
    rows, bare = [], []
    for image_id, asked in _by_image(questions).items():
        if image_id not in by_image:
            bare.append(image_id)
            continue
        named: set[str] = set()
        for q in asked:
            named |= coco.mentioned_categories([q["question"], *q["answers"]], categories)
        for i in by_image[image_id]:
            x, y, w, h = i.box
            rows.append((image_id, str(i.id), (x, y, x + w, y + h), i.category in named))
    if bare:
        log.warning(
            "%d images have no COCO instance annotations, so no boxes (e.g. %s)",
            len(bare),
            sorted(bare)[:5],
        )
    return _table(rows)


def gqa_boxes(
    questions: pa.Table, entries: Mapping[str, object], graphs: Mapping[str, object]
) -> pa.Table:
    """Boxes of the scene-graph objects of the images of ``questions``, relevant where a
    question's program or annotations select the object. ``entries`` is the
    balanced-questions JSON, ``graphs`` the scene-graphs JSON (both as read)."""
    from vqarobust.datasets import gqa, gqa_graphs

    by_number = gqa.questions_by_number(entries)
    rows = []
    for image_id, asked in _by_image(questions).items():
        graph = graphs.get(gqa.image_key(image_id))
        if graph is None:
            raise ValueError(f"GQA image {gqa.image_key(image_id)} has no scene graph")
        relevant: set[str] = set()
        for q in asked:
            relevant |= gqa_graphs.relevant_objects(by_number[int(q["question_id"])])
        for o in gqa_graphs.graph_objects(graph):  # type: ignore[arg-type]
            rows.append((image_id, o.id, o.box, o.id in relevant))
    return _table(rows)


def read_boxes(path: str | os.PathLike[str]) -> pa.Table:
    """A boxes table written by the ``object_boxes`` job (BOX_SCHEMA); other columns or
    types raise, naming the file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    if not table.schema.equals(BOX_SCHEMA, check_metadata=False):
        raise ValueError(
            f"{path}: not an object boxes table; its schema is {table.schema}, "
            f"expected {BOX_SCHEMA}"
        )
    return table


def relevant_boxes(table: pa.Table) -> dict[int, np.ndarray]:
    """Per image with box data, its relevant boxes as an (n, 4) float array of x0, y0,
    x1, y1 (n = 0 where no question depends on an annotated object)."""
    out = {int(i): np.zeros((0, 4), np.float32) for i in pc.unique(table["image_id"]).to_pylist()}
    kept = table.filter(table["relevant"])
    if not kept.num_rows:
        return out
    ids = kept["image_id"].to_numpy()
    boxes = np.stack([kept[k].to_numpy() for k in ("x0", "y0", "x1", "y1")], axis=1)
    order = np.argsort(ids, kind="stable")
    images, starts = np.unique(ids[order], return_index=True)
    for image_id, group in zip(images, np.split(boxes[order], starts[1:]), strict=True):
        out[int(image_id)] = group
    return out


def write_boxes(
    questions_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    adapter: str,
    sources: Mapping[str, str | os.PathLike[str]] | None = None,
    scene_seed: int = 0,
    split: str = "test",
) -> int:
    """Write the boxes table of the questions' images from the ``adapter``'s source
    (``sources``: ``instances`` for vqav2; ``questions`` and ``scene_graphs`` for gqa;
    none for scenes, whose graphs ``scene_seed`` and ``split`` generate). Logs how many
    images have boxes and relevant objects; returns the number of rows."""
    from vqarobust import store

    questions = store.read_questions(questions_path)
    sources = dict(sources or {})
    if adapter == "scenes":
        table = scenes_boxes(questions, scene_seed, split)
    elif adapter == "vqav2":
        table = coco_boxes(questions, sources["instances"])
    elif adapter == "gqa":
        from vqarobust.datasets.gqa import read_json

        entries = read_json(sources["questions"], "GQA questions")
        graphs = read_json(sources["scene_graphs"], "GQA scene graphs")
        table = gqa_boxes(questions, entries, graphs)
    else:
        raise ValueError(
            f"dataset adapter {adapter!r} has no object boxes; "
            f"those that have: {', '.join(SOURCES)}"
        )
    store.write_table(table, out_path)
    images = len(pc.unique(questions["image_id"]))
    boxed = len(pc.unique(table["image_id"]))
    relevant = len(pc.unique(table.filter(table["relevant"])["image_id"]))
    log.info(
        "%d boxes (%d relevant) on %d of %d images; %d images have a relevant object",
        len(table),
        pc.sum(table["relevant"]).as_py() or 0,
        boxed,
        images,
        relevant,
    )
    return len(table)

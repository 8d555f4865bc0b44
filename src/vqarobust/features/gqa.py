"""Feature tables of GQA images: released detections matched to the scene graphs, or
perfect sight from the scene graphs themselves (docs/context.md, "Feature models").

* Released detections (``gqa_h5``: GQA's ``gqa_objects_*.h5`` + info; ``obj36``: an
  LXMERT ``*_obj36.tsv``) keep the detector's rows in their order; each detection is
  matched to the scene-graph object of highest IoU when that IoU is at least 0.5 (the
  SwapMix paper's matching) and takes that object's id, class and attributes. Unmatched
  detections keep no labels: they are never swapped nor donors, and are counted (the
  table's metadata and the log).
* Perfect sight: one row per scene-graph object (by object id), its class and attribute
  names encoded through word vectors, its box from the graph.

Boxes are normalized by the image size the features were computed at (the feature
file's width and height; the scene graph's for perfect sight).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from vqarobust.datasets.gqa import image_key
from vqarobust.datasets.gqa_graphs import graph_objects
from vqarobust.features.matching import IOU_THRESHOLD, match_detections
from vqarobust.features.released import Detections, GqaObjects, read_obj36
from vqarobust.features.table import feature_table

log = logging.getLogger(__name__)

# The released kinds and the files each reads (config keys of its feature source).
RELEASED_FILES = {"gqa_h5": ("info", "folder"), "obj36": ("path",)}
RELEASED_KINDS = tuple(RELEASED_FILES)


def _graph(graphs: Mapping[str, Any], number: int) -> Mapping[str, Any]:
    key = image_key(number)
    if key not in graphs:
        raise KeyError(f"GQA image {key}: no scene graph")
    return graphs[key]


def graph_rows(graphs: Mapping[str, Any], image_numbers: Iterable[int]) -> list[dict]:
    """Perfect-sight rows (FEATURE_SCHEMA's columns but ``feature``): every scene-graph
    object of the images, by object id; boxes divided by the graph's width and height."""
    rows = []
    for number in sorted(set(image_numbers)):
        graph = _graph(graphs, number)
        size = np.array([graph["width"], graph["height"]] * 2, np.float64)
        for index, o in enumerate(graph_objects(graph)):
            box = (np.asarray(o.box) / size).clip(0, 1).tolist()
            rows.append(
                {
                    "image_id": number,
                    "object_index": index,
                    "object_id": o.id,
                    "box": box,
                    "class": o.name,
                    "attributes": list(o.attributes),
                }
            )
    return rows


def matched_rows(
    detections: Detections, graph: Mapping[str, Any], number: int
) -> tuple[list[dict], int]:
    """One image's feature rows (detector order; their features are the detections'
    rows, ``detections.features``) with the labels of the scene-graph objects they
    match, and how many detections matched none."""
    objects = graph_objects(graph)
    boxes = np.array([o.box for o in objects], np.float64).reshape(-1, 4)
    ids = match_detections(detections.boxes, boxes, [o.id for o in objects], IOU_THRESHOLD)
    by_id = {o.id: o for o in objects}
    normalized = detections.normalized_boxes().clip(0, 1)
    rows = []
    for index, (oid, box) in enumerate(zip(ids, normalized, strict=True)):
        o = by_id.get(oid) if oid is not None else None
        rows.append(
            {
                "image_id": number,
                "object_index": index,
                "object_id": oid,
                "box": box.tolist(),
                "class": o.name if o else None,
                "attributes": list(o.attributes) if o else None,
            }
        )
    return rows, sum(oid is None for oid in ids)


def read_detections(
    kind: str,
    settings: Mapping[str, Any],
    image_numbers: Iterable[int],
    optional: Iterable[int] = (),
) -> dict[int, Detections]:
    """The released detections of the images (``settings``: ``info`` and ``folder`` for
    gqa_h5, ``path`` for obj36); an image the file lacks raises, naming a few. The
    ``optional`` images (donors outside the questions' images) are read where the file
    holds them and otherwise left out."""
    numbers = sorted(set(image_numbers))
    extra = sorted(set(optional) - set(numbers))
    if kind == "gqa_h5":
        with GqaObjects(settings["info"], settings["folder"]) as objects:
            missing = [image_key(n) for n in numbers if image_key(n) not in objects]
            wanted = [] if missing else [*numbers, *(n for n in extra if image_key(n) in objects)]
            found = {n: objects.read(image_key(n)) for n in wanted}
    elif kind == "obj36":
        lines = read_obj36(settings["path"], [image_key(n) for n in [*numbers, *extra]])
        missing = [image_key(n) for n in numbers if image_key(n) not in lines]
        found = {n: lines[image_key(n)] for n in [*numbers, *extra] if image_key(n) in lines}
    else:
        raise ValueError(f"released feature kinds are {RELEASED_KINDS}, not {kind!r}")
    if missing:
        where = settings.get("info") or settings.get("path")
        raise KeyError(
            f"{kind} features ({where}) lack {len(missing)} of the {len(numbers)} "
            f"images the questions ask about, e.g. {missing[:5]}"
        )
    return found


def released_table(
    kind: str,
    settings: Mapping[str, Any],
    graphs: Mapping[str, Any],
    image_numbers: Iterable[int],
    donor_images: Iterable[int] = (),
) -> tuple[object, dict[str, int]]:
    """The feature table of the images from released detections (and of the
    ``donor_images`` the feature file holds), and the counts of detections, matched ones
    and unmatched ones, and of donor images the file lacks."""
    rows: list[dict] = []
    matrices = []
    unmatched = 0
    donors = set(donor_images) - set(image_numbers)
    found = read_detections(kind, settings, image_numbers, donors)
    for number, detections in sorted(found.items()):
        image_rows, n = matched_rows(detections, _graph(graphs, number), number)
        rows += image_rows
        matrices.append(detections.features)
        unmatched += n
    counts = {
        "images": len({r["image_id"] for r in rows}),
        "detections": len(rows),
        "matched": len(rows) - unmatched,
        "unmatched": unmatched,
    }
    if donors:
        counts["donor_images"] = len(donors & set(found))
        counts["donor_images_without_features"] = len(donors - set(found))
        kept, lacking = counts["donor_images"], counts["donor_images_without_features"]
        log.info("%s: %d of the split's %d other images are donors", kind, kept, len(donors))
        log.info("%s features: the file lacks %d of them (no donors from those)", kind, lacking)
    log.info(
        "%s features: %d detections of %d images, %d matched to a scene-graph object "
        "(IoU >= %.1f), %d unmatched (left alone)",
        kind,
        counts["detections"],
        counts["images"],
        counts["matched"],
        IOU_THRESHOLD,
        unmatched,
    )
    matrix = np.concatenate(matrices) if matrices else np.zeros((0, 0), np.float32)
    return feature_table(rows, matrix), counts


def label_names(graphs: Mapping[str, Any], image_numbers: Iterable[int]) -> list[str]:
    """Every class and attribute name of the images' scene graphs."""
    names: set[str] = set()
    for number in set(image_numbers):
        for o in graph_objects(_graph(graphs, number)):
            names |= {o.name, *o.attributes}
    return sorted(names)

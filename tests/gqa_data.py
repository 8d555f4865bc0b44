"""A GQA miniature in the official layouts, for tests (docs/datasets.md, "GQA").

Written here: a balanced-questions JSON (``semantic`` programs and ``annotations`` naming
object ids), a scene-graphs JSON, GQA's object features (``gqa_objects_<n>.h5`` +
``gqa_objects_info.json``, two h5 files) and an LXMERT ``obj36`` TSV holding the same
detections, optionally the images. Each scene-graph object has one detection (its box
moved a little: IoU well above 0.5); every image has one more detection matching no
object (IoU 0), which the matching must leave alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vqarobust.features.released import encode_obj36_line

CLASSES = ("cat", "dog", "table", "chair", "car", "tree", "bird", "lamp")
COLOURS = ("red", "white", "blue", "brown")
SIZES = ("small", "large")
WIDTH, HEIGHT = 640, 480
SLOTS = 100  # detections per image slot of GQA's h5 files


@dataclass(frozen=True)
class Miniature:
    questions: Path
    scene_graphs: Path
    info: Path
    h5_folder: Path
    tsv: Path
    images: Path | None
    answers: list[str]
    relevant: dict[str, set[str]]  # question id -> the object ids it selects
    n_unmatched: int
    dim: int


def _graph(rng: np.random.Generator) -> dict:
    n = int(rng.integers(4, 7))
    objects = {}
    used: set[str] = set()
    for _ in range(n):
        name = str(rng.choice([c for c in CLASSES if c not in used]))
        used.add(name)
        w, h = (int(v) for v in rng.integers(60, 140, size=2))
        x, y = int(rng.integers(0, WIDTH - w)), int(rng.integers(0, HEIGHT - h))
        oid = str(int(rng.integers(100000, 999999)))
        objects[oid] = {
            "name": name,
            "x": x,
            "y": y,
            "w": w,
            "h": h,
            "attributes": [str(rng.choice(COLOURS)), str(rng.choice(SIZES))],
            "relations": [],
        }
    return {"width": WIDTH, "height": HEIGHT, "objects": objects}


def _questions(image: str, graph: dict, first_id: int, rng: np.random.Generator) -> dict:
    """Three questions in GQA's format: a colour query, an existence check and a
    two-object choice, each naming its objects in its program and annotations."""
    ids = sorted(graph["objects"])
    a, b = (str(i) for i in rng.choice(ids, size=2, replace=False))
    oa, ob = graph["objects"][a], graph["objects"][b]
    colour = oa["attributes"][0]
    absent = next(c for c in CLASSES if c not in {o["name"] for o in graph["objects"].values()})
    out = {
        str(first_id): {
            "imageId": image,
            "question": f"What color is the {oa['name']}?",
            "answer": colour,
            "fullAnswer": f"The {oa['name']} is {colour}.",
            "semantic": [
                {"operation": "select", "argument": f"{oa['name']} ({a})", "dependencies": []},
                {"operation": "query", "argument": "color", "dependencies": [0]},
            ],
            "annotations": {"question": {"3": a}, "answer": {}, "fullAnswer": {"1": a}},
            "types": {"structural": "query", "semantic": "attr", "detailed": "colorQuery"},
            "isBalanced": True,
        },
        str(first_id + 1): {
            "imageId": image,
            "question": f"Is there a {absent}?",
            "answer": "no",
            "fullAnswer": f"No, there is no {absent}.",
            "semantic": [
                {"operation": "select", "argument": f"{absent} (-) ", "dependencies": []},
                {"operation": "exist", "argument": "?", "dependencies": [0]},
            ],
            "annotations": {"question": {}, "answer": {}, "fullAnswer": {}},
            "types": {"structural": "verify", "semantic": "obj", "detailed": "existC"},
            "isBalanced": True,
        },
        str(first_id + 2): {
            "imageId": image,
            "question": f"Which is larger, the {oa['name']} or the {ob['name']}?",
            "answer": oa["name"] if oa["w"] * oa["h"] >= ob["w"] * ob["h"] else ob["name"],
            "fullAnswer": "",
            "semantic": [
                {"operation": "select", "argument": f"{oa['name']} ({a})", "dependencies": []},
                {"operation": "select", "argument": f"{ob['name']} ({b})", "dependencies": []},
                {"operation": "choose larger", "argument": "", "dependencies": [0, 1]},
            ],
            "annotations": {"question": {"4": a, "7": b}, "answer": {}, "fullAnswer": {}},
            "types": {"structural": "compare", "semantic": "attr", "detailed": "sizeChoose"},
            "isBalanced": True,
        },
    }
    return out


def _detections(graph: dict, rng: np.random.Generator, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """One detection per object (box shifted by a few pixels) and one matching nothing."""
    boxes = []
    for oid in sorted(graph["objects"]):
        o = graph["objects"][oid]
        dx, dy = rng.integers(-4, 5, size=2)
        boxes.append([o["x"] + dx, o["y"] + dy, o["x"] + o["w"] + dx, o["y"] + o["h"] + dy])
    boxes.append([0, 0, 4, 4])  # a corner speck: no object there has IoU >= 0.5 with it
    order = rng.permutation(len(boxes))  # detectors list objects in no particular order
    boxes_arr = np.clip(np.array(boxes, np.float32)[order], 0, [WIDTH, HEIGHT, WIDTH, HEIGHT])
    return boxes_arr.astype(np.float32), rng.normal(size=(len(boxes), dim)).astype(np.float32)


def write_miniature(
    folder: Path, n_images: int = 6, dim: int = 16, seed: int = 0, images: bool = False
) -> Miniature:
    """Write the miniature under ``folder``; image ids alternate between Visual Genome's
    digits and GQA's ``n`` + digits."""
    import h5py

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    keys = [f"n{1000 + i}" if i % 2 else str(2_370_000 + i) for i in range(n_images)]
    graphs = {k: _graph(rng) for k in keys}
    questions: dict = {}
    for i, k in enumerate(keys):
        questions.update(_questions(k, graphs[k], 20_000_000 + 10 * i, rng))
    (folder / "testdev_balanced_questions.json").write_text(json.dumps(questions))
    (folder / "testdev_sceneGraphs.json").write_text(json.dumps(graphs))
    detections = {k: _detections(graphs[k], rng, dim) for k in keys}
    # Two h5 files, images spread over them, each image at its own slot.
    info, per_file = {}, {0: [], 1: []}
    for i, k in enumerate(keys):
        per_file[i % 2].append(k)
        info[k] = {
            "width": WIDTH,
            "height": HEIGHT,
            "objectsNum": len(detections[k][0]),
            "file": i % 2,
            "idx": len(per_file[i % 2]) - 1,
        }
    h5_folder = folder / "objects"
    h5_folder.mkdir(exist_ok=True)
    for index, members in per_file.items():
        boxes = rng.uniform(0, 50, size=(len(members), SLOTS, 4)).astype(np.float32)  # noise
        feats = rng.normal(size=(len(members), SLOTS, dim)).astype(np.float32)  # past the end
        for slot, k in enumerate(members):
            b, f = detections[k]
            boxes[slot, : len(b)], feats[slot, : len(b)] = b, f
        with h5py.File(h5_folder / f"gqa_objects_{index}.h5", "w") as h5:
            h5["bboxes"], h5["features"] = boxes, feats
    (folder / "gqa_objects_info.json").write_text(json.dumps(info))
    tsv = folder / "testdev_obj36.tsv"
    tsv.write_text(
        "".join(encode_obj36_line(k, WIDTH, HEIGHT, *detections[k]) for k in reversed(keys))
    )
    image_folder = None
    if images:
        from PIL import Image

        image_folder = folder / "images"
        image_folder.mkdir(exist_ok=True)
        for i, k in enumerate(keys):
            pixels = np.random.default_rng(i).integers(0, 255, (48, 64, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(image_folder / f"{k}.jpg")
    from vqarobust.datasets.gqa_graphs import relevant_objects

    answers = sorted({q["answer"] for q in questions.values()} | {"yes", *CLASSES, *COLOURS})
    return Miniature(
        folder / "testdev_balanced_questions.json",
        folder / "testdev_sceneGraphs.json",
        folder / "gqa_objects_info.json",
        h5_folder,
        tsv,
        image_folder,
        answers,
        {q: relevant_objects(e) for q, e in questions.items()},
        n_images,
        dim,
    )

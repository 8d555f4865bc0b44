"""Generated miniatures of VQAv2 in the exact official layout, for tests and dry runs.

VQAv2 itself is not redistributable here; a miniature lets the whole paper path (adapter,
archive reading, official scoring, planning at 3,000 images) run anywhere. Images are
photo-like JPEGs at COCO's common sizes; each question has ten human answers with the
disagreements real annotations show ("2" / "two" / "2 ", "yes." / "yes"); 3 to 8
questions per image (VQAv2 val averages 5.4).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vqarobust.corruptions.samples import photo_like
from vqarobust.datasets.question_types import question_type

COCO_SIZES = ((640, 480), (480, 640), (500, 375))  # (width, height)
SUBTYPE = "val2014"

# (question, answer type, pools of answers annotators give)
_TEMPLATES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Is there a dog in the picture?", "yes/no", ("yes", "yes.", "Yes", "no")),
    ("How many people are there?", "number", ("2", "two", "2 ", "3")),
    ("What color is the car?", "other", ("red", "red.", "dark red", "maroon")),
    ("What is the man holding?", "other", ("umbrella", "an umbrella", "umbrella!")),
    ("Are the lights on?", "yes/no", ("no", "no.", "yes")),
    ("What sport is being played?", "other", ("tennis", "Tennis", "tennis.")),
)


def image_name(image_id: int, subtype: str = SUBTYPE) -> str:
    """COCO's file name for an image id."""
    return f"COCO_{subtype}_{image_id:012d}.jpg"


def _answers(rng: np.random.Generator, pool: tuple[str, ...]) -> list[dict[str, Any]]:
    # Mostly the first answer, with realistic disagreement from the rest of the pool.
    weights = np.array([6.0] + [1.0] * (len(pool) - 1))
    picks = rng.choice(len(pool), size=10, p=weights / weights.sum())
    return [
        {
            "answer": pool[k],
            "answer_confidence": ("yes", "maybe", "no")[int(rng.integers(3))],
            "answer_id": i + 1,
        }
        for i, k in enumerate(picks)
    ]


def write_mini_vqav2(
    root: str | os.PathLike[str],
    n_images: int = 40,
    questions_per_image: tuple[int, int] = (3, 8),
    seed: int = 0,
    images: str = "folder",
    first_image_id: int = 9,
    instances: bool = False,
) -> dict[str, Path]:
    """Write ``questions.json``, ``annotations.json`` and the images under ``root``.

    ``images`` is ``folder`` (``val2014/COCO_val2014_*.jpg``), ``zip``
    (``val2014.zip`` holding that folder) or ``none`` (only the JSON files, for dry
    runs). With ``instances``, each image also gets 2-4 drawn objects and
    ``instances_val2014.json`` describes them in COCO's instance format (real category
    ids and names, boxes, polygons, areas; some crowd regions with RLE masks). Returns the
    paths, keyed like the ``dataset:`` config keys (``instances`` for the annotations).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = first_image_id + np.sort(rng.choice(50 * n_images, size=n_images, replace=False))
    questions, annotations = [], []
    for image_id in ids.tolist():
        for k in range(int(rng.integers(questions_per_image[0], questions_per_image[1] + 1))):
            question, answer_type, pool = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))]
            qid = image_id * 1000 + k
            questions.append({"image_id": image_id, "question": question, "question_id": qid})
            answers = _answers(rng, pool)
            annotations.append(
                {
                    "question_id": qid,
                    "image_id": image_id,
                    "question_type": question_type(question),
                    "answer_type": answer_type,
                    "multiple_choice_answer": answers[0]["answer"],
                    "answers": answers,
                }
            )
    paths = {"questions": root / "questions.json", "annotations": root / "annotations.json"}
    paths["questions"].write_text(
        json.dumps(
            {
                "info": {"description": "vqarobust miniature of VQAv2"},
                "task_type": "Open-Ended",
                "data_type": "mscoco",
                "data_subtype": SUBTYPE,
                "questions": questions,
            }
        )
    )
    paths["annotations"].write_text(
        json.dumps(
            {
                "info": {"description": "vqarobust miniature of VQAv2"},
                "data_type": "mscoco",
                "data_subtype": SUBTYPE,
                "annotations": annotations,
            }
        )
    )
    sizes = {image_id: COCO_SIZES[i % len(COCO_SIZES)] for i, image_id in enumerate(ids.tolist())}
    objects = _instances(sizes, seed) if instances else {}
    if instances:
        paths["instances"] = root / f"instances_{SUBTYPE}.json"
        paths["instances"].write_text(json.dumps(_coco_instances(sizes, objects)))
    if images == "none":
        (root / SUBTYPE).mkdir(exist_ok=True)
        paths["images"] = root / SUBTYPE
        return paths
    files = {}
    for image_id, (width, height) in sizes.items():
        image = Image.fromarray(photo_like(height, width, seed=image_id))
        _draw(image, objects.get(image_id, []))
        buf = io.BytesIO()
        image.save(buf, "JPEG", quality=90)
        files[f"{SUBTYPE}/{image_name(image_id)}"] = buf.getvalue()
    if images == "zip":
        paths["images"] = root / f"{SUBTYPE}.zip"
        with zipfile.ZipFile(paths["images"], "w", zipfile.ZIP_STORED) as zf:
            for name, data in files.items():
                zf.writestr(name, data)
    elif images == "folder":
        paths["images"] = root / SUBTYPE
        paths["images"].mkdir(exist_ok=True)
        for name, data in files.items():
            (root / name).write_bytes(data)
    else:
        raise ValueError(f"images must be folder, zip or none, not {images!r}")
    return paths


# Question forms of a generated pool: (form, answer type); {o} an object, {c} a colour.
_POOL_FORMS = (
    ("Is there a {o} in the picture?", "yes/no"),
    ("Is the {o} {c}?", "yes/no"),
    ("Are there any {o}s?", "yes/no"),
    ("Does the {o} look {c}?", "yes/no"),
    ("Can you see a {o}?", "yes/no"),
    ("Is the {o} {c} or white?", "other"),
    ("What color is the {o}?", "other"),
    ("How many {o}s are there?", "number"),
    ("Where is the {o}?", "other"),
    ("What is next to the {o}?", "other"),
)
_POOL_OBJECTS = (
    "dog",
    "car",
    "man",
    "umbrella",
    "bus",
    "cat",
    "bench",
    "chair",
    "bicycle",
    "plant",
    "clock",
    "kite",
)
_POOL_COLOURS = ("red", "blue", "green", "black", "brown")


def write_question_pool(
    root: str | os.PathLike[str], subtype: str = "train2014", n: int = 200, seed: int = 0
) -> dict[str, Path]:
    """A VQAv2 questions file and its annotations for ``n`` questions drawn from varied
    templates (yes/no, number, other; about half yes/no, some repeated), the kind of
    file ``basic_questions.pool_files`` takes. Returns ``questions`` and ``annotations``."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    questions, annotations = [], []
    for k in range(n):
        form, kind = _POOL_FORMS[int(rng.integers(len(_POOL_FORMS)))]
        text = form.format(
            o=_POOL_OBJECTS[int(rng.integers(len(_POOL_OBJECTS)))],
            c=_POOL_COLOURS[int(rng.integers(len(_POOL_COLOURS)))],
        )
        image_id, qid = 100_000 + k // 3, 100_000_000 + k
        questions.append({"image_id": image_id, "question": text, "question_id": qid})
        annotations.append(
            {
                "question_id": qid,
                "image_id": image_id,
                "answer_type": kind,
                "question_type": question_type(text),
            }
        )
    paths = {
        "questions": root / f"v2_OpenEnded_mscoco_{subtype}_questions.json",
        "annotations": root / f"v2_mscoco_{subtype}_annotations.json",
    }
    paths["questions"].write_text(json.dumps({"data_subtype": subtype, "questions": questions}))
    paths["annotations"].write_text(
        json.dumps({"data_subtype": subtype, "annotations": annotations})
    )
    return paths


# A few COCO categories with their official ids, and a colour to draw each.
MINI_CATEGORIES = {
    1: ("person", "person", (200, 60, 60)),
    2: ("bicycle", "vehicle", (60, 60, 200)),
    3: ("car", "vehicle", (60, 160, 60)),
    15: ("bench", "outdoor", (150, 110, 60)),
    17: ("cat", "animal", (230, 150, 40)),
    18: ("dog", "animal", (120, 70, 160)),
    28: ("umbrella", "accessory", (40, 170, 170)),
    62: ("chair", "furniture", (90, 90, 90)),
    64: ("potted plant", "furniture", (30, 120, 30)),
}


def _instances(sizes: dict[int, tuple[int, int]], seed: int) -> dict[int, list[dict]]:
    """2-4 boxes per image (at least 48 px a side), category ids from MINI_CATEGORIES; one
    image in five also gets a crowd region of people."""
    rng = np.random.default_rng([seed, 7])
    out: dict[int, list[dict]] = {}
    ann_id = 1
    for image_id, (width, height) in sizes.items():
        items = []
        for _ in range(int(rng.integers(2, 5))):
            w, h = (int(v) for v in rng.integers(48, 160, size=2))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            cat = int(rng.choice(list(MINI_CATEGORIES)))
            items.append({"id": ann_id, "category_id": cat, "bbox": [x, y, w, h], "iscrowd": 0})
            ann_id += 1
        if rng.random() < 0.2:
            items.append({"id": ann_id, "category_id": 1, "bbox": [0, 0, 60, 40], "iscrowd": 1})
            ann_id += 1
        out[image_id] = items
    return out


def _coco_instances(sizes: dict[int, tuple[int, int]], objects: dict[int, list[dict]]) -> dict:
    """COCO's instances file layout."""
    annotations = []
    for image_id, items in objects.items():
        for o in items:
            x, y, w, h = o["bbox"]
            if o["iscrowd"]:
                height = sizes[image_id][1]
                # Column-major RLE of the box: runs of background / foreground per column.
                counts = [0] + [v for _ in range(w) for v in (h, height - h)]
                segmentation = {"counts": counts[:-1], "size": [height, sizes[image_id][0]]}
            else:
                segmentation = [[x, y, x + w, y, x + w, y + h, x, y + h]]
            annotations.append(
                {
                    "id": o["id"],
                    "image_id": image_id,
                    "category_id": o["category_id"],
                    "bbox": [float(v) for v in o["bbox"]],
                    "area": float(w * h),
                    "iscrowd": o["iscrowd"],
                    "segmentation": segmentation,
                }
            )
    return {
        "info": {"description": "vqarobust miniature of COCO instances"},
        "licenses": [],
        "images": [
            {"id": i, "file_name": image_name(i), "width": w, "height": h}
            for i, (w, h) in sizes.items()
        ],
        "annotations": annotations,
        "categories": [
            {"id": k, "name": n, "supercategory": sc} for k, (n, sc, _) in MINI_CATEGORIES.items()
        ],
    }


def _draw(image: Image.Image, items: list[dict]) -> None:
    """Each non-crowd object as a filled ellipse of its category's colour in its box."""
    from PIL import ImageDraw

    draw = ImageDraw.Draw(image)
    for o in items:
        if not o["iscrowd"]:
            x, y, w, h = o["bbox"]
            draw.ellipse((x, y, x + w - 1, y + h - 1), fill=MINI_CATEGORIES[o["category_id"]][2])

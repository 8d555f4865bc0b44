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
        {"answer": pool[k], "answer_confidence": ("yes", "maybe", "no")[int(rng.integers(3))],
         "answer_id": i + 1}
        for i, k in enumerate(picks)
    ]  # fmt: skip


def write_mini_vqav2(
    root: str | os.PathLike[str],
    n_images: int = 40,
    questions_per_image: tuple[int, int] = (3, 8),
    seed: int = 0,
    images: str = "folder",
    first_image_id: int = 9,
) -> dict[str, Path]:
    """Write ``questions.json``, ``annotations.json`` and the images under ``root``.

    ``images`` is ``folder`` (``val2014/COCO_val2014_*.jpg``), ``zip``
    (``val2014.zip`` holding that folder) or ``none`` (only the JSON files, for dry
    runs). Returns the paths, keyed like the ``dataset:`` config keys.
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
            annotations.append({
                "question_id": qid, "image_id": image_id, "question_type": question_type(question),
                "answer_type": answer_type, "multiple_choice_answer": answers[0]["answer"],
                "answers": answers,
            })  # fmt: skip
    paths = {"questions": root / "questions.json", "annotations": root / "annotations.json"}
    paths["questions"].write_text(json.dumps({
        "info": {"description": "vqarobust miniature of VQAv2"}, "task_type": "Open-Ended",
        "data_type": "mscoco", "data_subtype": SUBTYPE, "questions": questions,
    }))  # fmt: skip
    paths["annotations"].write_text(json.dumps({
        "info": {"description": "vqarobust miniature of VQAv2"}, "data_type": "mscoco",
        "data_subtype": SUBTYPE, "annotations": annotations,
    }))  # fmt: skip
    if images == "none":
        (root / SUBTYPE).mkdir(exist_ok=True)
        paths["images"] = root / SUBTYPE
        return paths
    files = {}
    for i, image_id in enumerate(ids.tolist()):
        width, height = COCO_SIZES[i % len(COCO_SIZES)]
        buf = io.BytesIO()
        Image.fromarray(photo_like(height, width, seed=image_id)).save(buf, "JPEG", quality=90)
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

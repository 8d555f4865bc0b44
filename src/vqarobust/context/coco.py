"""SwapMix on COCO images (VQAv2): context objects from COCO instance annotations, swaps
done in image space by pasting another instance's crop into the context object's box.

Relevance: an instance is relevant to a question when its category is mentioned by the
question or any of its answers (category names and the synonyms in :data:`SYNONYMS`,
singular or plural). Every other instance (not a crowd region, at least ``min_area``
pixels) is context. A class swap pastes an instance of one of the ``k`` categories
nearest to the context object's own (MiniLM similarity of the category names, mentioned
categories excluded); an attribute swap pastes another instance of the same category. The
donor instance (from another image) is drawn per question from (seed, question id); its
box is cropped, resized to the context object's box and pasted over that box.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

# Words that name a COCO category besides its own name (plurals are added by rule).
SYNONYMS: dict[str, tuple[str, ...]] = {
    "person": (
        "people",
        "man",
        "men",
        "woman",
        "women",
        "boy",
        "boys",
        "girl",
        "girls",
        "child",
        "children",
        "kid",
        "kids",
        "player",
        "players",
        "guy",
        "lady",
        "ladies",
        "baby",
        "skier",
        "surfer",
        "skateboarder",
        "he",
        "she",
    ),
    "bicycle": ("bike", "bikes"),
    "motorcycle": ("motorbike", "motorbikes"),
    "airplane": ("plane", "planes", "jet", "jets", "aircraft"),
    "car": ("cars",),
    "dining table": ("table", "tables"),
    "couch": ("sofa", "sofas"),
    "tv": ("television", "tvs"),
    "cell phone": ("phone", "phones", "cellphone"),
    "sports ball": ("ball", "balls"),
    "potted plant": ("plant", "plants"),
    "hot dog": ("hotdog", "hotdogs"),
    "laptop": ("computer", "computers"),
    "donut": ("doughnut", "doughnuts"),
    "cup": ("mug", "mugs"),
}


@dataclass(frozen=True)
class Instance:
    """One COCO instance annotation."""

    id: int
    image_id: int
    category: str
    box: tuple[float, float, float, float]  # x, y, width, height (COCO's bbox)
    area: float
    crowd: bool


def read_instances(path: str | os.PathLike[str]) -> tuple[dict[int, list[Instance]], list[str]]:
    """Instances per image id and the category names, from COCO's
    ``instances_*.json`` (``annotations`` with ``bbox``, ``area``, ``iscrowd``,
    ``category_id``; ``categories`` with ``id`` and ``name``)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    names = {c["id"]: c["name"] for c in data["categories"]}
    by_image: dict[int, list[Instance]] = {}
    for a in data["annotations"]:
        if a["category_id"] not in names:
            raise ValueError(
                f"{path}: annotation {a['id']} has unknown category {a['category_id']}"
            )
        x, y, w, h = (float(v) for v in a["bbox"])
        by_image.setdefault(int(a["image_id"]), []).append(
            Instance(
                int(a["id"]),
                int(a["image_id"]),
                names[a["category_id"]],
                (x, y, w, h),
                float(a.get("area", w * h)),
                bool(a.get("iscrowd", 0)),
            )
        )
    for items in by_image.values():
        items.sort(key=lambda i: i.id)
    return by_image, sorted(set(names.values()))


_WORD = re.compile(r"[a-z]+")


def _forms(phrase: str) -> set[str]:
    words = phrase.split()
    last = words[-1]
    plurals = {last + "s", last + "es", last[:-1] + "ies" if last.endswith("y") else last + "s"}
    return {phrase} | {" ".join([*words[:-1], p]) for p in plurals}


def mentioned_categories(texts: Iterable[str], categories: Sequence[str]) -> set[str]:
    """Categories a question and its answers name (whole words; plurals and synonyms)."""
    words = " " + " ".join(" ".join(_WORD.findall(t.lower())) for t in texts) + " "
    found = set()
    for c in categories:
        names = set().union(*(_forms(n) for n in (c, *SYNONYMS.get(c, ()))))
        if any(f" {n} " in words for n in names):
            found.add(c)
    return found


@dataclass(frozen=True)
class CocoSwap:
    """Paste ``donor``'s box over ``target``'s box."""

    perturbation: str
    severity: int
    target: Instance
    donor: Instance
    rank: int = 1  # among this target's swaps of this kind


def coco_swaps(
    instances: Sequence[Instance],
    mentioned: set[str],
    neighbours: Mapping[str, list[str]],
    donors: Mapping[str, list[Instance]],
    k: int,
    rng: np.random.Generator,
    min_area: float = 1024.0,
    max_objects: int | None = None,
) -> list[CocoSwap]:
    """The swaps of one question: for each context instance (largest first; the first
    ``max_objects``, or every one when None: the paper's rule), one donor of each of its
    ``k`` nearest unmentioned categories (class swaps) and ``k`` other instances of its
    own category (attribute swaps), donors from other images drawn with ``rng``."""
    context = [
        i for i in instances if i.category not in mentioned and not i.crowd and i.area >= min_area
    ]
    context.sort(key=lambda i: (-i.area, i.id))
    swaps: list[CocoSwap] = []
    counters = {"swap_class": 0, "swap_attribute": 0}

    def pick(category: str, target: Instance) -> Instance | None:
        pool = [d for d in donors.get(category, ()) if d.image_id != target.image_id]
        return pool[int(rng.integers(len(pool)))] if pool else None

    for target in context[:max_objects]:
        classes = [c for c in neighbours[target.category] if c not in mentioned and donors.get(c)]
        for rank, c in enumerate(classes[:k], 1):
            donor = pick(c, target)
            if donor is not None:
                counters["swap_class"] += 1
                swaps.append(CocoSwap("swap_class", counters["swap_class"], target, donor, rank))
        for rank in range(1, k + 1):
            donor = pick(target.category, target)
            if donor is not None:
                counters["swap_attribute"] += 1
                swaps.append(
                    CocoSwap("swap_attribute", counters["swap_attribute"], target, donor, rank)
                )
    return swaps


def donor_pool(
    by_image: Mapping[int, list[Instance]], min_area: float = 1024.0
) -> dict[str, list[Instance]]:
    """Instances that can be pasted (not crowds, at least ``min_area``), per category."""
    pool: dict[str, list[Instance]] = {}
    for items in by_image.values():
        for i in items:
            if not i.crowd and i.area >= min_area:
                pool.setdefault(i.category, []).append(i)
    return pool


def _pixel_box(
    box: tuple[float, float, float, float], width: int, height: int
) -> tuple[int, int, int, int]:
    x, y, w, h = box
    x0, y0 = max(0, int(np.floor(x))), max(0, int(np.floor(y)))
    x1, y1 = min(width, int(np.ceil(x + w))), min(height, int(np.ceil(y + h)))
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"box {box} is outside the {width}x{height} image")
    return x0, y0, x1, y1


def paste(
    image: Image.Image, target_box: tuple, donor_image: Image.Image, donor_box: tuple
) -> Image.Image:
    """``image`` with ``donor_image``'s ``donor_box`` crop resized (bicubic) into
    ``target_box`` (COCO boxes: x, y, width, height); pixels outside the box unchanged."""
    out = image.convert("RGB").copy()
    tx0, ty0, tx1, ty1 = _pixel_box(target_box, *out.size)
    donor = donor_image.convert("RGB")
    crop = donor.crop(_pixel_box(donor_box, *donor.size))
    out.paste(crop.resize((tx1 - tx0, ty1 - ty0), Image.Resampling.BICUBIC), (tx0, ty0))
    return out


def decode(data: bytes) -> Image.Image:
    """An RGB PIL image from encoded bytes."""
    with Image.open(io.BytesIO(data)) as im:
        return im.convert("RGB")

"""Scenes: a generated multi-object VQA dataset whose answers follow from a scene graph.

Each 128x128 image holds 3 to 6 objects (8 shapes, 8 colours, 2 sizes) placed without
overlap. Its scene graph lists every object (id, shape, colour, size, centre, box); the
templated questions (colour of a named shape, shape of an object of a given colour, count
of a shape, existence of a coloured shape, size of a shape, left/right of two shapes) are
asked only where their referring expressions are unambiguous, and each records the
objects it depends on and the shapes and colours it mentions. Everything is a function of
(seed, split, image id): scenes, questions and renderings are regenerated identically
anywhere, so later stages (SwapMix, training augmentation) need no stored graph.

Objects a question does not depend on are its *context*: changing a context object's
shape or colour to one the question does not mention, or its size, cannot change the
true answer (docs/datasets.md, docs/context.md).
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image, ImageDraw

from vqarobust.datasets.prepare import Dataset
from vqarobust.datasets.question_types import single_answer_questions
from vqarobust.datasets.sources import ImageSource

SHAPES = ("circle", "square", "triangle", "star", "diamond", "hexagon", "pentagon", "cross")
COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 205, 30),
    "purple": (140, 60, 180),
    "orange": (245, 140, 30),
    "gray": (128, 128, 128),
    "brown": (130, 80, 40),
}
SIZES = {"small": 9, "large": 15}  # radius in pixels
SIDE = 128
SPLITS = {"train": 5000, "test": 2000}  # images per split
MAX_QUESTIONS = 6  # per image
# Question ids are image_id * ID_STRIDE + position, so they stay stable per image.
ID_STRIDE = 16
_SUPERSAMPLE = 2  # rendered at 2x and downsampled: smooth edges


@dataclass(frozen=True)
class SceneObject:
    """One object of a scene graph."""

    id: int
    shape: str
    colour: str
    size: str
    x: float
    y: float

    @property
    def radius(self) -> int:
        return SIZES[self.size]

    @property
    def box(self) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) in pixels."""
        r = self.radius
        return (self.x - r, self.y - r, self.x + r, self.y + r)


@dataclass(frozen=True)
class SceneQuestion:
    """A templated question: its answer, the objects it depends on, what it mentions."""

    question_id: int
    kind: str
    text: str
    answer: str
    depends: tuple[int, ...]
    shapes: tuple[str, ...]  # shapes the question mentions
    colours: tuple[str, ...]  # colours the question mentions


def _rng(seed: int, split: str, image_id: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, list(SPLITS).index(split), image_id, stream])


def scene(seed: int, split: str, image_id: int) -> list[SceneObject]:
    """The scene graph of one image: 3-6 objects, no two overlapping."""
    rng = _rng(seed, split, image_id, 0)
    wanted = int(rng.integers(3, 7))
    objects: list[SceneObject] = []
    for _ in range(wanted):
        size = str(rng.choice(list(SIZES)))
        r = SIZES[size]
        for _try in range(100):
            x, y = rng.uniform(r + 2, SIDE - r - 2, size=2)
            if all(np.hypot(x - o.x, y - o.y) >= r + o.radius + 3 for o in objects):
                break
        else:
            continue  # no room left for this one
        shape = str(rng.choice(SHAPES))
        colour = str(rng.choice(list(COLOURS)))
        objects.append(
            SceneObject(len(objects), shape, colour, size, round(float(x), 1), round(float(y), 1))
        )
    return objects


def _polygon(shape: str, x: float, y: float, r: float) -> list[tuple[float, float]]:
    def ring(n: int, radius: float, start: float = -np.pi / 2) -> list[tuple[float, float]]:
        a = start + 2 * np.pi * np.arange(n) / n
        return list(zip(x + radius * np.cos(a), y + radius * np.sin(a), strict=True))

    if shape == "triangle":
        return ring(3, r)
    if shape == "diamond":
        return ring(4, r)
    if shape == "pentagon":
        return ring(5, r)
    if shape == "hexagon":
        return ring(6, r, 0.0)
    if shape == "star":
        outer, inner = ring(5, r), ring(5, 0.45 * r, -np.pi / 2 + np.pi / 5)
        return [p for pair in zip(outer, inner, strict=True) for p in pair]
    if shape == "cross":
        w = 0.35 * r
        return [
            (x - w, y - r),
            (x + w, y - r),
            (x + w, y - w),
            (x + r, y - w),
            (x + r, y + w),
            (x + w, y + w),
            (x + w, y + r),
            (x - w, y + r),
            (x - w, y + w),
            (x - r, y + w),
            (x - r, y - w),
            (x - w, y - w),
        ]
    raise ValueError(f"unknown shape {shape!r}")


def render(
    objects: Sequence[SceneObject], background: tuple[int, int, int] = (235, 235, 230)
) -> Image.Image:
    """The scene as a 128x128 RGB image."""
    k = _SUPERSAMPLE
    image = Image.new("RGB", (SIDE * k, SIDE * k), background)
    draw = ImageDraw.Draw(image)
    for o in objects:
        x, y, r, fill = o.x * k, o.y * k, o.radius * k, COLOURS[o.colour]
        if o.shape == "circle":
            draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)
        elif o.shape == "square":
            s = 0.85 * r
            draw.rectangle((x - s, y - s, x + s, y + s), fill=fill)
        else:
            draw.polygon(_polygon(o.shape, x, y, r), fill=fill)
    return image.resize((SIDE, SIDE), Image.Resampling.LANCZOS)


def _plural(shape: str) -> str:
    return shape + ("es" if shape.endswith("s") else "s")


def questions(
    seed: int, split: str, image_id: int, objects: Sequence[SceneObject]
) -> list[SceneQuestion]:
    """The image's questions (up to :data:`MAX_QUESTIONS`, seeded choice among those whose
    references are unambiguous), answers from the scene graph."""
    by_shape: dict[str, list[SceneObject]] = {s: [] for s in SHAPES}
    by_colour: dict[str, list[SceneObject]] = {c: [] for c in COLOURS}
    for o in objects:
        by_shape[o.shape].append(o)
        by_colour[o.colour].append(o)
    unique_shapes = [s for s in SHAPES if len(by_shape[s]) == 1]
    rng = _rng(seed, split, image_id, 1)
    cands: list[tuple[str, str, str, tuple[int, ...], tuple[str, ...], tuple[str, ...]]] = []
    for s in unique_shapes:
        o = by_shape[s][0]
        cands.append(("colour", f"What color is the {s}?", o.colour, (o.id,), (s,), ()))
        cands.append(("size", f"What size is the {s}?", o.size, (o.id,), (s,), ()))
    for c, objs in by_colour.items():
        if len(objs) == 1:
            o = objs[0]
            cands.append(("shape", f"What shape is the {c} object?", o.shape, (o.id,), (), (c,)))
    # Counting: one shape that is there, one drawn from all shapes.
    counted = (objects[int(rng.integers(len(objects)))].shape, str(rng.choice(SHAPES)))
    for s in dict.fromkeys(counted):
        objs = by_shape[s]
        cands.append(
            (
                "count",
                f"How many {_plural(s)} are there?",
                str(len(objs)),
                tuple(o.id for o in objs),
                (s,),
                (),
            )
        )
    # Existence: one coloured shape that is there and one drawn at random (mostly not).
    seen = objects[int(rng.integers(len(objects)))]
    drawn = (str(rng.choice(list(COLOURS))), str(rng.choice(SHAPES)))
    for c, s in dict.fromkeys([(seen.colour, seen.shape), drawn]):
        match = tuple(p.id for p in objects if (p.colour, p.shape) == (c, s))
        cands.append(("exist", f"Is there a {c} {s}?", "yes" if match else "no", match, (s,), (c,)))
    pairs = [
        (a, b)
        for a in unique_shapes
        for b in unique_shapes
        if a != b and abs(by_shape[a][0].x - by_shape[b][0].x) >= 10
    ]
    if pairs:
        a, b = pairs[int(rng.integers(len(pairs)))]
        oa, ob = by_shape[a][0], by_shape[b][0]
        answer = "yes" if oa.x < ob.x else "no"
        cands.append(
            ("relation", f"Is the {a} to the left of the {b}?", answer, (oa.id, ob.id), (a, b), ())
        )
    picked = sorted(rng.permutation(len(cands))[:MAX_QUESTIONS].tolist())
    return [SceneQuestion(image_id * ID_STRIDE + i, *cands[j]) for i, j in enumerate(picked)]


def context_objects(objects: Sequence[SceneObject], question: SceneQuestion) -> list[SceneObject]:
    """The objects the question does not depend on."""
    return [o for o in objects if o.id not in question.depends]


def swap(objects: Sequence[SceneObject], object_id: int, **changes: str) -> list[SceneObject]:
    """The scene with one object's shape, colour or size changed (same place)."""
    return [replace(o, **changes) if o.id == object_id else o for o in objects]


def png(image: Image.Image) -> bytes:
    """PNG bytes of a rendered scene (lossless: the shards keep what was rendered)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class SceneImages(ImageSource):
    """A split's images, rendered on demand from their scene graphs."""

    def __init__(self, seed: int, split: str) -> None:
        self.seed, self.split = seed, split

    def ids(self) -> set[int]:
        return set(range(SPLITS[self.split]))

    def read(self, image_id: int) -> bytes:
        if image_id not in range(SPLITS[self.split]):
            raise FileNotFoundError(f"scenes {self.split} has no image {image_id}")
        return png(render(scene(self.seed, self.split, image_id)))

    def describe(self, image_id: int) -> str:
        return f"scenes {self.split} image {image_id} (seed {self.seed})"


def iter_split(
    seed: int, split: str
) -> Iterator[tuple[int, list[SceneObject], list[SceneQuestion]]]:
    """(image id, scene graph, questions) of every image of a split."""
    if split not in SPLITS:
        raise ValueError(f"scenes has splits {tuple(SPLITS)}, not {split!r}")
    for image_id in range(SPLITS[split]):
        objects = scene(seed, split, image_id)
        yield image_id, objects, questions(seed, split, image_id, objects)


def read_scenes(split: str = "test", scene_seed: int = 0) -> Dataset:
    """One split of the scenes dataset as a questions table and its (rendered) images.

    Answers are repeated ten times as for easy-VQA, so VQA accuracy equals exact match.
    """
    rows = [
        (q.question_id, image_id, q.text, q.answer)
        for image_id, _, qs in iter_split(scene_seed, split)
        for q in qs
    ]
    ids, image_ids, texts, answers = (list(c) for c in zip(*rows, strict=True))
    table = single_answer_questions(ids, image_ids, texts, answers)
    describe = {"adapter": "scenes", "split": split, "scene_seed": scene_seed}
    return Dataset(table, SceneImages(scene_seed, split), describe)


def question_index(
    seed: int, split: str, image_ids: Sequence[int]
) -> dict[int, tuple[list[SceneObject], SceneQuestion]]:
    """question id -> (its image's scene graph, the question), for the given images."""
    out = {}
    for image_id in image_ids:
        objects = scene(seed, split, image_id)
        for q in questions(seed, split, image_id, objects):
            out[q.question_id] = (objects, q)
    return out

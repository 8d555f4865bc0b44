"""SwapMix swaps of a scene's context objects, and the class neighbourhoods they use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vqarobust.datasets.scenes import COLOURS, SIZES, SceneObject, SceneQuestion, context_objects
from vqarobust.perturbations import PERTURBATIONS

CONTEXT = PERTURBATIONS.view("context perturbation", modality="context")
# A context perturbation's severity is the index of a swap among the question's swaps of
# that kind (1..objects x k, objects capped by context.max_objects or not at all), so it
# has no fixed count: a run asks every index its swap table holds.


@CONTEXT.register("swap_class", kind="class")
def _swap_class() -> None:
    """Replace a context object by one of the k classes nearest to its own."""


@CONTEXT.register("swap_attribute", kind="attribute")
def _swap_attribute() -> None:
    """Change a context object's colour or size, keeping its class."""


CONTEXT_PERTURBATIONS = ("swap_class", "swap_attribute")


@dataclass(frozen=True)
class Swap:
    """One swap of one context object for one question."""

    perturbation: str  # swap_class or swap_attribute
    severity: int  # 1-based index among the question's swaps of this kind
    object_id: int
    changes: tuple[tuple[str, str], ...]  # (field, new value), e.g. (("shape", "star"),)
    rank: int = 1  # among this object's swaps of this kind: the first k' are a k' run's

    def apply(self, objects: Sequence[SceneObject]) -> list[SceneObject]:
        """The scene with this swap made."""
        from vqarobust.datasets.scenes import swap

        return swap(objects, self.object_id, **dict(self.changes))


def class_neighbours(classes: Sequence[str], vectors: np.ndarray) -> dict[str, list[str]]:
    """Per class, the other classes from most to least similar (cosine of the unit-length
    ``vectors`` of their names; ties by name)."""
    sims = vectors @ vectors.T
    out = {}
    for i, c in enumerate(classes):
        others = [j for j in range(len(classes)) if j != i]
        others.sort(key=lambda j: (-round(float(sims[i, j]), 6), classes[j]))
        out[c] = [classes[j] for j in others]
    return out


def describe(o: SceneObject) -> str:
    """``small red circle``."""
    return f"{o.size} {o.colour} {o.shape}"


def class_changes(
    o: SceneObject, question: SceneQuestion, neighbours: dict[str, list[str]], k: int
) -> list[tuple[tuple[str, str], ...]]:
    """Class swaps of one context object: its ``k`` nearest classes that the question does
    not mention."""
    shapes = [c for c in neighbours[o.shape] if c not in question.shapes][:k]
    return [(("shape", shape),) for shape in shapes]


def attribute_changes(o: SceneObject, question: SceneQuestion) -> list[tuple[tuple[str, str], ...]]:
    """Attribute swaps of one context object: every other (colour, size) pair without a
    colour the question mentions, as the fields that change."""
    out = []
    for colour in COLOURS:
        for size in SIZES:
            if (colour, size) == (o.colour, o.size) or colour in question.colours:
                continue
            fields = (("colour", colour, o.colour), ("size", size, o.size))
            out.append(tuple((f, v) for f, v, old in fields if v != old))
    return out


def scene_swaps(
    objects: Sequence[SceneObject],
    question: SceneQuestion,
    neighbours: dict[str, list[str]],
    k: int,
    rng: np.random.Generator,
    max_objects: int | None = None,
) -> list[Swap]:
    """The SwapMix swaps of one question: for each context object (in id order, the first
    ``max_objects``, or every one when None: the paper's rule), its class swaps
    (:func:`class_changes`) and ``k`` of its attribute swaps (:func:`attribute_changes`),
    drawn with ``rng``."""
    swaps: list[Swap] = []
    counters = {"swap_class": 0, "swap_attribute": 0}
    for o in context_objects(objects, question)[:max_objects]:  # None: every one
        for rank, changes in enumerate(class_changes(o, question, neighbours, k), 1):
            counters["swap_class"] += 1
            swaps.append(Swap("swap_class", counters["swap_class"], o.id, changes, rank))
        pairs = attribute_changes(o, question)
        # Ranked by draw order (so the first k' of a run with k are a k' run's draws), made
        # in the pairs' order.
        drawn = rng.permutation(len(pairs))[:k].tolist()
        for i in sorted(drawn):
            counters["swap_attribute"] += 1
            swaps.append(
                Swap(
                    "swap_attribute", counters["swap_attribute"], o.id, pairs[i], drawn.index(i) + 1
                )
            )
    return swaps

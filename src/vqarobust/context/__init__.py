"""Visual context reliance (SwapMix): swaps of the objects a question does not depend on.

``swap_class`` replaces one context object by an object of one of the k classes nearest
to its own (MiniLM similarity of the class names); ``swap_attribute`` keeps its class and
changes its colour or size. Neither may use a class or colour the question mentions, so
the true answer cannot change. Scenes (:mod:`vqarobust.datasets.scenes`) are re-rendered
exactly; docs/context.md has the details and the metrics.
"""

from __future__ import annotations

from vqarobust.context.swapmix import (
    CONTEXT_PERTURBATIONS,
    Swap,
    class_neighbours,
    scene_swaps,
)

__all__ = ["CONTEXT_PERTURBATIONS", "Swap", "class_neighbours", "scene_swaps"]

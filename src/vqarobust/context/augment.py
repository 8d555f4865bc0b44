"""SwapMix as training augmentation on scenes: swap context objects at random per step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from vqarobust.context.swapmix import Swap, attribute_changes, class_changes
from vqarobust.datasets import scenes
from vqarobust.seeding import item_rng


class SwapMixAugmenter:
    """Swapped training images of scenes questions, seeded per (seed, step, question)."""

    def __init__(
        self,
        question_ids: Sequence[int],
        image_ids: Sequence[int],
        scene_seed: int,
        split: str,
        seed: int,
        p_object: float = 0.5,
        p_class: float = 0.5,
        k: int = 3,
    ) -> None:
        from vqarobust.materialize.context import shape_neighbours

        self.question_ids = list(question_ids)
        self.index = scenes.question_index(scene_seed, split, image_ids)
        missing = [q for q in self.question_ids if q not in self.index]
        if missing:
            raise ValueError(
                f"SwapMix training: {len(missing)} training questions are not scenes {split} "
                f"questions of scene_seed {scene_seed} (e.g. {missing[:3]})"
            )
        self.seed, self.p_object, self.p_class, self.k = seed, p_object, p_class, k
        self.neighbours = shape_neighbours()
        self.swapped = 0  # images changed so far, for the log

    def swaps(self, step: int, question_id: int) -> list[Swap]:
        """The swaps made to this question's scene in this step."""
        objects, question = self.index[question_id]
        rng = item_rng(self.seed, "swapmix-train", step, question_id)
        out = []
        for o in scenes.context_objects(objects, question):
            if rng.random() >= self.p_object:
                continue
            if rng.random() < self.p_class:
                options = class_changes(o, question, self.neighbours, self.k)
            else:
                options = attribute_changes(o, question)
            changes = options[int(rng.integers(len(options)))] if options else ()
            if changes:
                out.append(Swap("swapmix", len(out) + 1, o.id, changes))
        return out

    def pixels(
        self, step: int, rows: Sequence[int], clean: torch.Tensor, processor: Any
    ) -> torch.Tensor:
        """Pixel values of the given training questions (row numbers) for this step: the
        clean rows of ``clean`` where nothing was swapped, re-rendered scenes elsewhere."""
        out = clean.clone()
        changed, images = [], []
        for i, row in enumerate(rows):
            qid = self.question_ids[row]
            swaps = self.swaps(step, qid)
            if not swaps:
                continue
            objects = self.index[qid][0]
            for sw in swaps:
                objects = sw.apply(objects)
            changed.append(i)
            images.append(scenes.render(objects))
        if images:
            out[changed] = processor(images, return_tensors="pt")["pixel_values"]
            self.swapped += len(images)
        return out

"""Models that answer "x" to everything, for the inference and resume tests: they count
what they were asked and can fail, or answer slowly, like a job that gets killed."""

from __future__ import annotations

import time

from vqarobust.models.base import VQAModel


class Counting(VQAModel):
    """Answers 'x'; raises after `fail_after` batches, like a job killed mid-way."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(batch_size=4)
        self.fail_after = fail_after
        self.answered = 0
        self.batches = 0

    def answer(self, images: list, questions: list[str]) -> list[str]:
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise RuntimeError("killed")
        self.batches += 1
        self.answered += len(questions)
        return ["x"] * len(questions)


class Slow(Counting):
    """Answers slowly, so a test can kill the job between chunks."""

    def answer(self, images: list, questions: list[str]) -> list[str]:
        time.sleep(0.3)
        return super().answer(images, questions)


def count_image_encodes(model, encoded: list[int]) -> None:
    """Make a classifier adapter append, per call of its image side, the number of images
    it encoded: ViLT's patch embedding (one image a call), the late-fusion CNN's
    features."""
    if model._is_vilt:
        embed = model._visual_embed
        model._visual_embed = lambda *a: encoded.append(1) or embed(*a)
    else:
        encode = model.model.encode_images
        model.model.encode_images = lambda pixels: encoded.append(len(pixels)) or encode(pixels)

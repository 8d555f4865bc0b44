"""The model adapter interface: answer questions about images, in batches."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
from PIL import Image


class VQAModel(ABC):
    """A loaded VQA model. Constructor keyword arguments are the model's config entry.

    Subclasses implement :meth:`answer` for one batch; :meth:`answer_all` sorts
    requests by question length (so an out-of-memory error shows on the first batch),
    batches them and restores the input order. Exceptions propagate: an empty answer
    would be a silently wrong score.
    """

    def __init__(self, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    @abstractmethod
    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Answer one batch: ``questions[i]`` is asked about ``images[i]``."""

    def answer_all(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Answer any number of requests in batches; returns answers in input order."""
        if len(images) != len(questions):
            raise ValueError(f"{len(images)} images but {len(questions)} questions")
        # Longest first: the batch most likely to run out of memory comes first.
        order = np.argsort([-len(q) for q in questions], kind="stable")
        answers: list[str | None] = [None] * len(questions)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = self.answer([images[i] for i in idx], [questions[i] for i in idx])
            if len(batch) != len(idx):
                raise RuntimeError(
                    f"{type(self).__name__}.answer returned {len(batch)} answers "
                    f"for {len(idx)} questions"
                )
            for i, a in zip(idx, batch, strict=True):
                answers[i] = a
        return answers  # type: ignore[return-value]

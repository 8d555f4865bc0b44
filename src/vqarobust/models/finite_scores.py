"""Which rows of a generation met scores that are not numbers.

Greedy decoding takes the argmax of each step's scores, and argmax of a NaN row is a token
like any other: a half-precision overflow would pass for an answer. The check rides along
as a logits processor, so no step's scores are kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor

from vqarobust.models.replies import NON_FINITE, Reply


class FiniteScores(LogitsProcessor):
    """A no-op logits processor that notes, per row, whether every step's scores were
    finite."""

    def __init__(self, rows: int) -> None:
        self.finite = torch.ones(rows, dtype=torch.bool)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.finite &= torch.isfinite(scores).all(dim=-1).cpu()
        return scores

    def mark(self, replies: Sequence[str]) -> list[str | Reply]:
        """The replies, a ``non_finite`` :class:`Reply` (keeping the text) where a step's
        scores were not finite."""
        return [
            r if ok else Reply(r, NON_FINITE)
            for r, ok in zip(replies, self.finite.tolist(), strict=True)
        ]

"""What became of each request: the model's answer, or the reason there is none.

Only an ``answered`` row is the model's own answer to its input and enters a metric; the
other statuses are failures of the path to the model (a server's filter, a cut-off, a
request that failed after its retries, scores that are not numbers) and are counted apart
(docs/metrics.md, "Answer status").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ANSWERED = "answered"
EMPTY = "empty"  # no text (content null or blank), or an answer post-processed to nothing
FILTERED = "filtered"  # the server's content filter withheld the reply
TRUNCATED = "truncated"  # cut by the token limit before any text came
FAILED = "failed"  # the request failed after its retries
NON_FINITE = "non_finite"  # a local model's scores held NaN or inf
STATUSES = (ANSWERED, EMPTY, FILTERED, TRUNCATED, FAILED, NON_FINITE)


@dataclass(frozen=True)
class Reply:
    """One request's outcome as an adapter reports it, when a bare answer string cannot
    say it all: the raw ``text`` (None when nothing came back), its ``status`` and the
    server's ``finish_reason``."""

    text: str | None
    status: str = ANSWERED
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"reply status must be one of {STATUSES}, not {self.status!r}")


@dataclass
class Responses:
    """A call's outcomes in input order: per request the answer (None unless answered),
    the raw reply (None for a label), the status and the server's finish reason."""

    answers: list[str | None] = field(default_factory=list)
    raw: list[str | None] = field(default_factory=list)
    status: list[str] = field(default_factory=list)
    finish_reason: list[str | None] = field(default_factory=list)

    @classmethod
    def sized(cls, n: int) -> Responses:
        return cls([None] * n, [None] * n, [ANSWERED] * n, [None] * n)

    def set(self, i: int, answer: str | Reply, raw: str | Reply | None) -> None:
        """Record request ``i``: a plain answer string is answered unless it is blank; a
        :class:`Reply` (as answer or as raw reply) brings its own status."""
        reply = answer if isinstance(answer, Reply) else raw if isinstance(raw, Reply) else None
        text = raw.text if isinstance(raw, Reply) else raw
        if reply is not None and reply.status != ANSWERED:
            self.answers[i], self.raw[i] = None, text
            self.status[i], self.finish_reason[i] = reply.status, reply.finish_reason
            return
        value = answer.text if isinstance(answer, Reply) else answer
        blank = value is None or not value.strip()
        self.answers[i] = None if blank else value
        self.raw[i] = text
        self.status[i] = EMPTY if blank else ANSWERED
        self.finish_reason[i] = reply.finish_reason if reply is not None else None


def argmax_labels(scores: Any, labels: Sequence[str] | dict[int, str]) -> list[str | Reply]:
    """Per row of ``scores`` (a 2-D tensor or array), the label of its largest score, or a
    ``non_finite`` :class:`Reply` where the row holds NaN or inf: argmax of such a row is
    label 0 or an arbitrary one, which would pass for an answer."""
    array = scores.detach().float().cpu().numpy() if hasattr(scores, "detach") else scores
    array = np.asarray(array)
    finite = np.isfinite(array).all(axis=-1)
    best = np.where(finite[:, None], array, 0).argmax(axis=-1)
    return [
        labels[int(b)] if ok else Reply(None, NON_FINITE)
        for b, ok in zip(best.tolist(), finite.tolist(), strict=True)
    ]

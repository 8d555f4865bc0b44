"""Split a question into words and the text between them, and put it back together.

Perturbations edit words in place, so punctuation, digits and spacing that they do not
touch survive unchanged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

# Letters and digits, with inner apostrophes ("what's", "o'clock"); underscores are no word.
WORD = re.compile(r"([^\W_]+(?:'[^\W_]+)*)")

# Share of a question's words a perturbation touches at severities 1..5 (docs/text.md).
# At least one word is touched whenever one is eligible, so severity 1 changes a short
# question too.
WORD_SHARE = (0.1, 0.2, 0.3, 0.4, 0.5)
# nlpaug's aug_char_max: at most this many characters of one word are edited.
CHAR_MAX = 10


@dataclass(frozen=True)
class Rates:
    """How much a text perturbation changes at each severity (``text.word_share``,
    ``text.char_share``, ``text.char_min_length``; docs/text.md): ``word_share[s - 1]`` of
    the words are touched at severity s (at least one). A character perturbation edits
    one character of each touched word, or with ``char_share`` that share of its
    characters (rounded up, at most :data:`CHAR_MAX`: nlpaug's ``aug_char_p``), and
    touches only words of at least ``char_min_length`` characters (nlpaug's ``min_char``).
    """

    word_share: tuple[float, ...] = WORD_SHARE
    char_share: float | None = None
    char_min_length: int = 1

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Rates:
        """From the workflow's params (the three config keys)."""
        return cls(
            tuple(float(v) for v in params["word_share"]),
            params["char_share"],
            int(params["char_min_length"]),
        )

    def chars(self, n_chars: int, n_options: int) -> int:
        """How many characters of a touched word of ``n_chars`` characters are edited
        (``n_options`` positions can be)."""
        if self.char_share is None:
            return min(1, n_options)
        return min(n_options, CHAR_MAX, max(1, math.ceil(self.char_share * n_chars)))


RATES = Rates()


def split(question: str) -> list[str]:
    """Pieces ``[sep, word, sep, word, ..., sep]``: words sit at the odd indices."""
    return WORD.split(question)


def join(pieces: list[str]) -> str:
    """The question from its pieces, with runs of whitespace collapsed and ends stripped."""
    return " ".join("".join(pieces).split())


def n_touched(n_words: int, severity: int, n_eligible: int, rates: Rates = RATES) -> int:
    """How many words a perturbation touches: ``rates.word_share`` of the words at this
    severity, at least one, at most the eligible ones."""
    shares = rates.word_share
    if not 1 <= severity <= len(shares):
        raise ValueError(f"text severity must be in 1..{len(shares)}, got {severity!r}")
    k = max(1, int(shares[severity - 1] * n_words + 0.5))
    return min(k, n_eligible)


def pick(rng: np.random.Generator, candidates: list[int], k: int) -> list[int]:
    """``k`` distinct candidates, in a seeded random order."""
    if k <= 0 or not candidates:
        return []
    return [candidates[i] for i in rng.choice(len(candidates), size=k, replace=False)]


def match_case(word: str, like: str) -> str:
    """``word`` capitalized like ``like`` (all caps, first capital, or as is)."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word

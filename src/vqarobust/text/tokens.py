"""Split a question into words and the text between them, and put it back together.

Perturbations edit words in place, so punctuation, digits and spacing that they do not
touch survive unchanged.
"""

from __future__ import annotations

import re

import numpy as np

# Letters and digits, with inner apostrophes ("what's", "o'clock"); underscores are no word.
WORD = re.compile(r"([^\W_]+(?:'[^\W_]+)*)")

# Share of a question's words a perturbation touches at severities 1..5 (docs/text.md).
# At least one word is touched whenever one is eligible, so severity 1 changes a short
# question too.
WORD_SHARE = (0.1, 0.2, 0.3, 0.4, 0.5)


def split(question: str) -> list[str]:
    """Pieces ``[sep, word, sep, word, ..., sep]``: words sit at the odd indices."""
    return WORD.split(question)


def join(pieces: list[str]) -> str:
    """The question from its pieces, with runs of whitespace collapsed and ends stripped."""
    return " ".join("".join(pieces).split())


def n_touched(n_words: int, severity: int, n_eligible: int) -> int:
    """How many words a perturbation touches: ``WORD_SHARE`` of the words, at least one,
    at most the eligible ones."""
    if not 1 <= severity <= len(WORD_SHARE):
        raise ValueError(f"text severity must be in 1..{len(WORD_SHARE)}, got {severity!r}")
    k = max(1, int(WORD_SHARE[severity - 1] * n_words + 0.5))
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

"""A text perturbation: words written in capitals, as in a shouted question."""

from __future__ import annotations

import numpy as np

from vqarobust.text import tokens
from vqarobust.text.registry import TEXT_PERTURBATIONS


@TEXT_PERTURBATIONS.register(level="word")
def shout(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """``rates.word_share`` of the words (the built-ins' scale, at least one) upper-cased,
    chosen with the item's ``rng``."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    for i in tokens.pick(rng, words, tokens.n_touched(len(words), severity, len(words), rates)):
        pieces[i] = pieces[i].upper()
    return tokens.join(pieces)

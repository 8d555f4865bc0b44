"""Question perturbations (modality ``text``) and basic-question noise (``basic_question``).

``names()`` lists the text perturbations; ``perturb(question, name, severity, seed)``
applies one. Character level (:mod:`.characters`): keyboard, ocr, char_insert,
char_replace, char_swap, char_delete. Word level (:mod:`.words`): synonym_replace,
word_insert (both need WordNet, :mod:`.wordnet`), word_swap, word_swap_random (EDA's
random swap), word_delete, punct_insert.
``basic_questions(questions, pool, k, ranker)`` ranks other questions of the dataset by
similarity to each main question (:mod:`.ranking`); sentence-level rewrites through configured
text-to-text models live in :mod:`.sentence`. docs/text.md has the rates and choices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vqarobust.seeding import derive_seed
from vqarobust.text import (  # noqa: F401  (importing registers them)
    characters,
    encoder,
    pools,
    ranking,
    sentence,
    words,
)
from vqarobust.text.ranking import basic_questions
from vqarobust.text.registry import TEXT_PERTURBATIONS
from vqarobust.text.tokens import RATES, WORD_SHARE, Rates
from vqarobust.text.wordnet import WordNetMissing, wordnet_dir

SEVERITIES = tuple(range(1, len(WORD_SHARE) + 1))


def names(level: str | None = None, available: bool = False) -> list[str]:
    """Text perturbation names, optionally of one ``level`` (char, word, or sentence: the
    model rewrites of :mod:`.sentence`, listed only when asked for); with ``available``
    only those that can run here (the WordNet ones need WordNet)."""
    found = TEXT_PERTURBATIONS.list(**({"level": level} if level else {}))
    if level is None:
        found = [n for n in found if TEXT_PERTURBATIONS.entry(n).tags["level"] != "sentence"]
    if available and wordnet_dir() is None:
        found = [n for n in found if needs(n) != "wordnet"]
    return found


def needs(name: str) -> str | None:
    """What a perturbation needs beyond the question (``wordnet``, or None)."""
    return TEXT_PERTURBATIONS.entry(name).tags.get("needs")


def level(name: str) -> str:
    """``char`` or ``word``."""
    return TEXT_PERTURBATIONS.entry(name).tags["level"]


def perturb(question: str, name: str, severity: int, seed: int = 0, rates: Rates = RATES) -> str:
    """``question`` perturbed by ``name`` at ``severity`` (0 = unchanged) at ``rates``,
    drawing from a generator seeded with ``seed``. A question with no word the
    perturbation can touch comes back unchanged (never empty)."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    fn = TEXT_PERTURBATIONS.get(name)
    if level(name) == "sentence":
        raise ValueError(f"{name} rewrites with a model: use vqarobust.text.sentence.rewrite")
    top = len(rates.word_share)
    if not isinstance(severity, (int, np.integer)) or not 0 <= severity <= top:
        raise ValueError(f"severity of {name!r} must be an integer in 0..{top}, got {severity!r}")
    if severity == 0:
        return question
    if needs(name) == "wordnet" and wordnet_dir() is None:
        from vqarobust.text.wordnet import missing_message

        raise WordNetMissing(f"{name}: {missing_message()}")
    out = fn(question, int(severity), np.random.default_rng(seed), rates)
    return out if out.strip() else question


def perturb_item(
    question: str,
    name: str,
    severity: int,
    global_seed: int,
    question_id: Any,
    attempt: int = 0,
    rates: Rates = RATES,
) -> str:
    """Perturb one dataset question with the seed of (global seed, question id, name,
    severity), plus the attempt number when the fidelity filter resamples."""
    parts: list[Any] = [question_id, name, severity] + ([attempt] if attempt else [])
    return perturb(question, name, severity, derive_seed(global_seed, *parts), rates)


__all__ = [
    "RATES",
    "SEVERITIES",
    "Rates",
    "TEXT_PERTURBATIONS",
    "WordNetMissing",
    "basic_questions",
    "level",
    "names",
    "needs",
    "perturb",
    "perturb_item",
]

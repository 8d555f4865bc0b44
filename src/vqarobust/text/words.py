"""Word-level question perturbations: synonyms, insertion, swaps, deletion, punctuation.

Severity sets how many words are touched (:class:`vqarobust.text.tokens.Rates`). Synonyms come from
WordNet 3.0 (:mod:`vqarobust.text.wordnet`); function words (``STOPWORDS``) are never
replaced, since a synonym of "is" or "what" ("exist", "which") changes the question
rather than its wording. nlpaug's SynonymAug is not used: it tags parts of speech with
nltk's tagger model, which has to be downloaded.
"""

from __future__ import annotations

import numpy as np

from vqarobust.text import tokens, wordnet
from vqarobust.text.registry import TEXT_PERTURBATIONS

# Function words: articles, auxiliaries, pronouns, prepositions, conjunctions and the
# question words VQA questions start with.
STOPWORDS = frozenset(
    """a an the this that these those there here is are was were be been being am do does
    did done has have had having can could will would shall should may might must what
    which who whom whose when where why how i me my you your he him his she her it its we
    us our they them their of in on at by for with to from into onto about above below
    over under between behind near and or but not no nor if than then so as any some all
    each both other such own same too very just only also up down out off there's what's
    it's isn't aren't doesn't don't""".split()  # noqa: SIM905
)

# AEDA's punctuation marks (Karimi et al., 2021).
PUNCTUATION = (".", ";", "?", ":", "!", ",")


def _replaceable(word: str) -> bool:
    return word.lower() not in STOPWORDS and word.isalpha() and bool(wordnet.synonyms(word))


def _synonym(word: str, rng: np.random.Generator) -> str:
    options = wordnet.synonyms(word)
    return tokens.match_case(options[int(rng.integers(len(options)))], word)


@TEXT_PERTURBATIONS.register(level="word", needs="wordnet")
def synonym_replace(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """Content words replaced by a WordNet synonym."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    eligible = [i for i in words if _replaceable(pieces[i])]
    for i in tokens.pick(
        rng, eligible, tokens.n_touched(len(words), severity, len(eligible), rates)
    ):
        pieces[i] = _synonym(pieces[i], rng)
    return tokens.join(pieces)


@TEXT_PERTURBATIONS.register(level="word", needs="wordnet")
def word_insert(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """A synonym of a content word of the question inserted at a random word position."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    sources = [pieces[i] for i in words if _replaceable(pieces[i])]
    if not sources:
        return tokens.join(pieces)
    for _ in range(tokens.n_touched(len(words), severity, len(words), rates)):
        new = _synonym(sources[int(rng.integers(len(sources)))], rng).lower()
        slot = int(rng.integers(len(words) + 1))  # before word `slot`, or after the last
        if slot < len(words):
            pieces[words[slot]] = f"{new} {pieces[words[slot]]}"
        else:
            pieces[words[-1]] = f"{pieces[words[-1]]} {new}"
    return tokens.join(pieces)


@TEXT_PERTURBATIONS.register(level="word")
def word_swap(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """Neighbouring words swapped (one swap per touched word)."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    pairs = words[:-1]
    for i in tokens.pick(rng, pairs, tokens.n_touched(len(words), severity, len(pairs), rates)):
        pieces[i], pieces[i + 2] = pieces[i + 2], pieces[i]
    return tokens.join(pieces)


@TEXT_PERTURBATIONS.register(level="word")
def word_swap_random(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """EDA's random swap (Wei and Zou, 2019): as many times as words are touched, two
    words at random positions trade places (a later swap may move an earlier one back)."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    if len(words) < 2:
        return tokens.join(pieces)
    for _ in range(tokens.n_touched(len(words), severity, len(words), rates)):
        a, b = (words[int(i)] for i in rng.choice(len(words), size=2, replace=False))
        pieces[a], pieces[b] = pieces[b], pieces[a]
    return tokens.join(pieces)


@TEXT_PERTURBATIONS.register(level="word")
def word_delete(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """Words deleted; one word always stays."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    k = tokens.n_touched(len(words), severity, max(len(words) - 1, 0), rates)
    for i in sorted(tokens.pick(rng, words, k), reverse=True):
        before, after = pieces[i - 1], pieces[i + 1]
        # Keep punctuation on either side ("colour?" -> "?"), drop one space.
        sep = before.rstrip() + after if after.strip() else before + after.lstrip()
        pieces[i - 1 : i + 2] = [sep]
    return tokens.join(pieces)


@TEXT_PERTURBATIONS.register(level="word")
def punct_insert(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """Punctuation marks inserted between words (AEDA)."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    for i in sorted(
        tokens.pick(rng, words, tokens.n_touched(len(words), severity, len(words), rates))
    ):
        mark = PUNCTUATION[int(rng.integers(len(PUNCTUATION)))]
        pieces[i] = f"{mark} {pieces[i]}"
    return tokens.join(pieces)

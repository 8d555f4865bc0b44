"""Character-level question perturbations: keyboard and OCR typos, random character edits.

Each touched word gets one character edit, or a share of its characters; severity sets
how many words are touched (:class:`vqarobust.text.tokens.Rates`). Keyboard neighbours and
OCR confusions are nlpaug's tables (the library the multimodal-robustness study used),
read from the installed package as nlpaug's models read them (tests/test_text.py holds
them equal); the sampling is ours, with an explicit generator per item (nlpaug draws from
Python's global ``random``, which cannot be seeded per question without touching process
state).
"""

from __future__ import annotations

import importlib.util
import json
import re
import string
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from vqarobust.text import tokens
from vqarobust.text.registry import TEXT_PERTURBATIONS

LETTERS = string.ascii_lowercase


def _nlpaug_table(name: str) -> dict[str, list[str]]:
    """nlpaug's ``res/char/<name>/en.json``, found without importing nlpaug: its package
    imports torch and pandas (about 3.3 s of CPU here) to read two plain JSON files."""
    spec = importlib.util.find_spec("nlpaug")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("nlpaug is not installed: pip install -e . installs it")
    folder = Path(spec.submodule_search_locations[0])
    return json.loads((folder / "res" / "char" / name / "en.json").read_text(encoding="utf-8"))


@cache
def keyboard_neighbours() -> dict[str, list[str]]:
    """Lower-case key -> neighbouring keys (letters and digits) on an English QWERTY
    keyboard: what nlpaug's ``Keyboard(special_char=False, numeric=True,
    upper_case=False)`` makes of ``res/char/keyboard/en.json`` (keys and neighbours of
    lower-case letters and digits only, sorted, without the key itself)."""
    plain = re.compile("^[a-z0-9]*$")
    out = {}
    for key, neighbours in _nlpaug_table("keyboard").items():
        if plain.match(key):
            kept = sorted({n for n in neighbours if plain.match(n) and n != key})
            if kept:
                out[key] = kept
    return out


@cache
def ocr_confusions() -> dict[str, list[str]]:
    """Character -> characters OCR confuses it with: nlpaug's ``Ocr`` model of
    ``res/char/ocr/en.json``, which adds the reverse of every pair (0 -> o and o -> 0)."""
    table = _nlpaug_table("ocr")
    out = {k: list(v) for k, v in table.items()}
    for k, confused in table.items():
        for c in confused:
            out.setdefault(c, [])
            if k not in out[c]:
                out[c].append(k)
    return out


def _edit_words(
    question: str,
    severity: int,
    rng: np.random.Generator,
    positions: Callable[[str], list[int]],
    edit: Callable[[str, int, np.random.Generator], str],
    rates: tokens.Rates,
    keep: int = 0,
) -> str:
    """Apply ``edit(word, position, rng)`` to each of the touched words, at one position
    or, with ``rates.char_share``, at that share of its characters (distinct positions,
    edited from the last, so an insertion or deletion moves none still to come); a word
    is eligible when it has ``rates.char_min_length`` characters and ``positions(word)``
    lists a position that can be edited; at least ``keep`` of its characters stay."""
    pieces = tokens.split(question)
    words = list(range(1, len(pieces), 2))
    eligible = [
        i for i in words if len(pieces[i]) >= rates.char_min_length and positions(pieces[i])
    ]
    n = tokens.n_touched(len(words), severity, len(eligible), rates)
    for i in tokens.pick(rng, eligible, n):
        options = positions(pieces[i])
        if rates.char_share is None:
            pieces[i] = edit(pieces[i], options[int(rng.integers(len(options)))], rng)
            continue
        m = min(rates.chars(len(pieces[i]), len(options)), len(pieces[i]) - keep)
        for pos in sorted(
            (options[int(j)] for j in rng.choice(len(options), m, replace=False)), reverse=True
        ):
            pieces[i] = edit(pieces[i], pos, rng)
    return tokens.join(pieces)


def _substitute(
    question: str,
    severity: int,
    rng: np.random.Generator,
    table: dict[str, list[str]],
    fold_case: bool,
    rates: tokens.Rates,
) -> str:
    """Replace one character of each touched word with one of ``table[char]``; with
    ``fold_case`` the table is looked up in lower case and the result keeps the case."""

    def key(c: str) -> str:
        return c.lower() if fold_case else c

    def edit(word: str, pos: int, rng: np.random.Generator) -> str:
        c = word[pos]
        choices = table[key(c)]
        new = choices[int(rng.integers(len(choices)))]
        if fold_case and c.isupper():
            new = new.upper()
        return word[:pos] + new + word[pos + 1 :]

    def positions(word: str) -> list[int]:
        return [p for p, c in enumerate(word) if key(c) in table]

    return _edit_words(question, severity, rng, positions, edit, rates)


@TEXT_PERTURBATIONS.register(level="char")
def keyboard(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """Typos: a character becomes a neighbouring key (case kept)."""
    return _substitute(question, severity, rng, keyboard_neighbours(), True, rates)


@TEXT_PERTURBATIONS.register(level="char")
def ocr(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """OCR confusions: 0/o, 1/l, 8/s, ... (only words holding a confusable character)."""
    return _substitute(question, severity, rng, ocr_confusions(), False, rates)


@TEXT_PERTURBATIONS.register(level="char")
def char_insert(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """A random letter inserted into the word."""

    def edit(word: str, pos: int, rng: np.random.Generator) -> str:
        return word[:pos] + LETTERS[int(rng.integers(26))] + word[pos:]

    return _edit_words(question, severity, rng, lambda w: list(range(len(w) + 1)), edit, rates)


@TEXT_PERTURBATIONS.register(level="char")
def char_replace(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """A letter replaced by a different random letter."""

    def edit(word: str, pos: int, rng: np.random.Generator) -> str:
        others = LETTERS.replace(word[pos].lower(), "")
        new = others[int(rng.integers(len(others)))]
        return word[:pos] + (new.upper() if word[pos].isupper() else new) + word[pos + 1 :]

    return _edit_words(
        question, severity, rng, lambda w: [p for p, c in enumerate(w) if c.isalpha()], edit, rates
    )


@TEXT_PERTURBATIONS.register(level="char")
def char_swap(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """Two neighbouring, different characters swapped."""

    def edit(word: str, pos: int, rng: np.random.Generator) -> str:
        return word[:pos] + word[pos + 1] + word[pos] + word[pos + 2 :]

    return _edit_words(
        question,
        severity,
        rng,
        lambda w: [p for p in range(len(w) - 1) if w[p] != w[p + 1]],
        edit,
        rates,
    )


@TEXT_PERTURBATIONS.register(level="char")
def char_delete(
    question: str, severity: int, rng: np.random.Generator, rates: tokens.Rates = tokens.RATES
) -> str:
    """A character deleted (words of two or more characters, so no word vanishes)."""

    def edit(word: str, pos: int, rng: np.random.Generator) -> str:
        return word[:pos] + word[pos + 1 :]

    return _edit_words(
        question,
        severity,
        rng,
        lambda w: list(range(len(w))) if len(w) > 1 else [],
        edit,
        rates,
        keep=1,
    )

"""Word vectors of class and attribute names: a GloVe text file, or the shipped MiniLM.

The SwapMix paper ranks classes by the cosine of their GloVe vectors and encodes perfect
sight with them. GloVe is not shipped and cannot be downloaded here, so without
``context.word_vectors`` the names are embedded by the shipped MiniLM sentence encoder
(documented as the offline substitute in docs/context.md). A multi-word name ("dining
table") gets the mean of its words' GloVe vectors; a name none of whose words is in the
file gets a zero vector, counted and named in the log.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable

import numpy as np

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9]+")


def words_of(name: str) -> list[str]:
    """The lower-case words of a name, as looked up in a GloVe file."""
    return _WORD.findall(name.lower())


def read_glove(path: str | os.PathLike[str], words: Iterable[str]) -> dict[str, np.ndarray]:
    """The vectors of ``words`` from a GloVe text file (``word v1 v2 ...`` per line),
    streamed: only the wanted lines are parsed."""
    wanted = set(words)
    out: dict[str, np.ndarray] = {}
    dim = None
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            word, _, rest = line.rstrip("\n").partition(" ")
            if word not in wanted or word in out:
                continue
            try:
                vector = np.array(rest.split(" "), np.float32)
            except ValueError:
                raise ValueError(
                    f"{path}, line {number}: not a GloVe line (word then numbers)"
                ) from None
            if dim is None:
                dim = len(vector)
            if len(vector) != dim or dim == 0:
                raise ValueError(f"{path}, line {number}: {len(vector)} numbers, expected {dim}")
            out[word] = vector
            if len(out) == len(wanted):
                break
    return out


def word_vectors(names: Iterable[str], path: str | None = None) -> dict[str, np.ndarray]:
    """name -> float32 vector for every name: from the GloVe file at ``path``, or the
    shipped MiniLM (unit length) without one."""
    names = sorted(set(names))
    if not names:
        return {}
    if path is None:
        from vqarobust.text import encoder

        matrix = encoder.encode(names)
        return {n: matrix[i] for i, n in enumerate(names)}
    found = read_glove(path, {w for n in names for w in words_of(n)})
    if not found:
        raise ValueError(f"{path}: none of the {len(names)} names' words is in the file")
    dim = len(next(iter(found.values())))
    out, missing = {}, []
    for n in names:
        vectors = [found[w] for w in words_of(n) if w in found]
        if not vectors:
            missing.append(n)
        out[n] = (
            np.mean(vectors, axis=0).astype(np.float32) if vectors else np.zeros(dim, np.float32)
        )
    if missing:
        log.warning(
            "%s: %d of %d names have no word in the file and get a zero vector: %s",
            path,
            len(missing),
            len(names),
            missing[:10],
        )
    return out


def identity(path: str | None) -> dict[str, str]:
    """What names the word vectors, for the workflow's params (a file by its SHA-256)."""
    if path is None:
        from vqarobust.text import encoder

        return {"word_vectors": "minilm", **encoder.identity(None)}
    from vqarobust.digests import file_sha256

    if not os.path.isfile(path):
        raise FileNotFoundError(f"word vectors file {path} does not exist")
    return {"word_vectors": os.path.abspath(path), "sha256": file_sha256(path)}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity; 0 when either vector is zero."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na and nb else 0.0

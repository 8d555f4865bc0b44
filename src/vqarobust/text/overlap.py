"""Word-overlap similarities of a main question against a whole candidate pool at once.

The basic-question paper ranks candidates with the caption metrics BLEU-1..4, ROUGE,
CIDEr and METEOR next to its LASSO. Their maintained libraries score one pair at a time
in Python, which is far too slow for a pool of 186,000 questions and 16,000 main
questions, so ROUGE-L and CIDEr-D are computed here for every candidate at once and tested
against ``pycocoevalcap``, coco-caption's Python port (tests/test_overlap.py).
METEOR's alignment (exact, stem and WordNet synonym matches, fragmentation penalty) has
no vectorized form: it is nltk's ``single_meteor_score`` per pair.

The MQ is the reference and a candidate the hypothesis throughout.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse

# rouge-score's tokenizer: lower case, anything but [a-z0-9] separates tokens.
_ROUGE_SPLIT = re.compile(r"[^a-z0-9]+")
CIDER_N = 4
CIDER_SIGMA = 6.0  # pycocoevalcap's length penalty width
_WORD_BITS = 63  # MQs up to this many tokens take the bit-parallel LCS


def rouge_tokens(question: str) -> list[str]:
    """Tokens as rouge-score makes them (no stemming, its default)."""
    return [t for t in _ROUGE_SPLIT.split(question.lower()) if t]


def token_matrix(texts: Sequence[str]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """ROUGE tokens of every text as ids: (vocabulary, (n, longest) id matrix padded with
    -1, lengths)."""
    vocab: dict[str, int] = {}
    tokens = [[vocab.setdefault(t, len(vocab)) for t in rouge_tokens(s)] for s in texts]
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    ids = np.full((len(texts), max(1, int(lengths.max(initial=0)))), -1, dtype=np.int64)
    for i, t in enumerate(tokens):
        ids[i, : len(t)] = t
    return vocab, ids, lengths


def lcs_lengths(mq: Sequence[int], ids: np.ndarray) -> np.ndarray:
    """Length of the longest common subsequence of ``mq`` (token ids) with every row of
    ``ids`` (-1 = padding). Bit-parallel over the MQ's positions (Crochemore et al. 2001:
    V <- (V + (V & M)) | (V & ~M), the LCS is the number of zero bits), one step per
    candidate position for all candidates at once; a longer MQ takes the dynamic program."""
    m = len(mq)
    if m == 0 or ids.shape[0] == 0:
        return np.zeros(ids.shape[0], dtype=np.int64)
    if m > _WORD_BITS:
        return _lcs_dynamic(mq, ids)
    top = int(max(ids.max(initial=-1), max(mq))) + 2
    lut = np.zeros(top, dtype=np.uint64)  # token id -> bit mask of its MQ positions
    for position, token in enumerate(mq):
        lut[token] |= np.uint64(1) << np.uint64(position)
    full = np.uint64((1 << m) - 1)
    v = np.full(ids.shape[0], full, dtype=np.uint64)
    for j in range(ids.shape[1]):
        match = lut[ids[:, j]]  # padding (-1) reads the last entry, which is 0
        u = v & match
        v = ((v + u) | (v & ~match)) & full
    return m - np.bitwise_count(v).astype(np.int64)


def _lcs_dynamic(mq: Sequence[int], ids: np.ndarray) -> np.ndarray:
    prev = np.zeros((ids.shape[0], ids.shape[1] + 1), dtype=np.int64)
    for token in mq:
        cur = np.zeros_like(prev)
        hit = ids == token
        for j in range(ids.shape[1]):
            cur[:, j + 1] = np.where(
                hit[:, j], prev[:, j] + 1, np.maximum(prev[:, j + 1], cur[:, j])
            )
        prev = cur
    return prev[:, -1]


# coco-caption's ROUGE-L weighs recall by beta = 1.2 (rouge-score's F-measure is beta = 1).
ROUGE_BETA = 1.2


def rouge_l(mq: str, vocab: dict[str, int], ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """ROUGE-L of every candidate (rows of ``ids``) against ``mq`` as coco-caption
    (pycocoevalcap's ``Rouge.calc_score(candidate, [mq])``, the papers' reference): the LCS
    of the tokens, precision LCS / candidate length, recall LCS / MQ length, and
    ((1 + b^2) P R) / (R + b^2 P) with b = 1.2; tokens are rouge-score's (lower case,
    ``[a-z0-9]+``)."""
    tokens = rouge_tokens(mq)
    # An MQ token the pool never uses matches nothing: a fresh id keeps its position.
    mq_ids = [vocab.get(t, len(vocab) + i) for i, t in enumerate(tokens)]
    lcs = lcs_lengths(mq_ids, ids).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(lengths > 0, lcs / np.maximum(lengths, 1), 0.0)
        recall = lcs / len(tokens) if tokens else np.zeros_like(lcs)
        b2 = ROUGE_BETA**2
        f = np.where(
            (precision > 0) & (recall > 0),
            (1 + b2) * precision * recall / (recall + b2 * precision),
            0.0,
        )
    return f


class CiderIndex:
    """CIDEr-D over a pool: tf-idf n-gram weights (n = 1..4) of every candidate with the
    document frequencies of the pool itself (each candidate one document, as CIDEr-D
    counts its references), their norms, and the lengths of its length penalty."""

    def __init__(
        self,
        vocabularies: Sequence[dict[tuple[str, ...], int]],
        counts: Sequence[Any],
        words: np.ndarray,
    ) -> None:
        n_docs = counts[0].shape[0]
        self.ref_len = float(np.log(max(n_docs, 1)))
        self.vocabularies = vocabularies
        self.idf: list[np.ndarray] = []
        self.weights: list[Any] = []
        self.norms: list[np.ndarray] = []
        for matrix in counts[:CIDER_N]:
            csc = sparse.csc_matrix(matrix)
            df = np.diff(csc.indptr).astype(np.float64)  # candidates holding each n-gram
            idf = self.ref_len - np.log(np.maximum(df, 1.0))
            weighted = csc @ sparse.diags(idf)
            self.idf.append(idf)
            self.weights.append(sparse.csc_matrix(weighted))
            self.norms.append(np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel()))
        # pycocoevalcap's "length" counts the bigrams (its n-gram index 1): words - 1.
        self.lengths = np.maximum(words - 1, 0)

    def scores(self, mq_words: Sequence[str], idx: np.ndarray) -> np.ndarray:
        """CIDEr-D (x 10, clipped, Gaussian length penalty) of candidates ``idx``."""
        total = np.zeros(len(idx))
        for n in range(1, CIDER_N + 1):
            grams = Counter(tuple(mq_words[i : i + n]) for i in range(len(mq_words) - n + 1))
            vocab, idf = self.vocabularies[n - 1], self.idf[n - 1]
            ref = {g: c * (idf[vocab[g]] if g in vocab else self.ref_len) for g, c in grams.items()}
            ref_norm = float(np.sqrt(sum(w * w for w in ref.values())))
            inside = [(vocab[g], w) for g, w in ref.items() if g in vocab]
            if not inside:
                continue
            cols, r = (np.array(v) for v in zip(*inside, strict=True))
            sub = self.weights[n - 1][:, cols].tocsc()
            rep = np.repeat(r, np.diff(sub.indptr))
            sub.data = np.minimum(sub.data, rep) * rep
            num = np.asarray(sub.sum(axis=1)).ravel()[idx]
            denom = self.norms[n - 1][idx] * ref_norm
            total += np.where(denom > 0, num / np.where(denom > 0, denom, 1.0), num)
        delta = self.lengths[idx] - max(len(mq_words) - 1, 0)
        return 10.0 * total / CIDER_N * np.exp(-(delta**2) / (2 * CIDER_SIGMA**2))


def meteor(
    mq_words: Sequence[str], candidates: Sequence[Sequence[str]], wordnet: Any
) -> np.ndarray:
    """nltk's METEOR (alpha 0.9, beta 3, gamma 0.5; exact, Porter-stem and WordNet synonym
    matches) of each candidate against the MQ."""
    from nltk.translate.meteor_score import single_meteor_score

    ref = list(mq_words)
    return np.array(
        [single_meteor_score(ref, list(c), wordnet=wordnet) if c else 0.0 for c in candidates],
        dtype=np.float64,
    )

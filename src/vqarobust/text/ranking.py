"""Basic-question noise: rank other questions of a pool by similarity to a main one.

For each main question (MQ) the candidates are the pool's distinct questions, never the MQ
itself nor one identical to it after normalization (:func:`normalize_question`); with
``exclude_main="run"`` never any main question of the run. Rankers score the candidates
(higher = more similar):

- ``bq_lasso``: the MQ's sentence embedding b is approximated by a sparse combination x
  of candidate embeddings A, min ||Ax - b||^2 + lambda ||x||_1; the weights are the
  scores. Fast mode (default): scikit-learn's ``Lasso(positive=True,
  fit_intercept=False)`` with ``alpha = lambda / (2 d)`` (d embedding dimensions) over
  the ``prefilter`` cosine-nearest candidates; when fewer than k weights are non-zero,
  alpha is divided by 10 (up to ``LASSO_RETRIES`` times). Paper mode: the paper's
  unconstrained problem over the whole pool with its lambda (1e-6), solved exactly
  (:mod:`vqarobust.text.lasso`). Either way ranks still missing (zero or negative weights) are
  filled by cosine similarity; each ranked question records which (``source``) and the
  alpha used.
- ``bq_cosine``: cosine similarity of the embeddings.
- ``bq_bleu`` (BLEU-4), ``bq_bleu1``..``bq_bleu3``: coco-caption's sentence BLEU (no
  smoothing; ``bleu_smoothing="add_one"``: Lin & Och's add-one smoothing for n >= 2,
  nltk's ``SmoothingFunction().method2``), for the whole pool at once from sparse n-gram
  counts.
- ``bq_rouge`` (coco-caption's ROUGE-L, beta 1.2), ``bq_cider`` (CIDEr-D, document
  frequencies over the pool),
  ``bq_meteor`` (nltk's METEOR; needs WordNet): :mod:`vqarobust.text.overlap`.

Each ranker ranks two pools (the paper's two basic-question datasets): the general one
(``bq_*``, GBQD) and its yes/no questions (``ynbq_*``, YNBQD).

The top k (21) make ``k // 3`` noise levels: level L is the MQ followed by the basic
questions ranked 3L-2 .. 3L.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl

from vqarobust.metrics.vqa_accuracy import normalize_answer
from vqarobust.perturbations import PERTURBATIONS
from vqarobust.progress import Progress
from vqarobust.registry import RegistryView
from vqarobust.text import lasso, overlap

log = logging.getLogger(__name__)

BQ_RANKERS: RegistryView = PERTURBATIONS.view("basic-question ranker", modality="basic_question")

DEFAULT_K = 21
PER_LEVEL = 3
DEFAULT_PREFILTER = 300
DEFAULT_ALPHA = 1e-3
PAPER_LAMBDA = 1e-6  # the basic-question paper's lambda
LASSO_MODES = ("fast", "paper")
LASSO_RETRIES = 4
MAX_BLEU_N = 4  # the pool's n-gram counts go up to 4-grams
# Tags of a ranker on the general pool; its yes/no twin is registered at the end.
_GENERAL = {"dataset": "general", "severities": DEFAULT_K // PER_LEVEL}

RANKING_SCHEMA = {
    "question": pl.String,
    "ranker": pl.String,
    "rank": pl.Int32,
    "basic_question": pl.String,
    "score": pl.Float64,
    "source": pl.String,
    "alpha": pl.Float64,
    "method": pl.String,
}


@dataclass
class Candidates:
    """The candidate pool: distinct questions, their normalized forms and embeddings, and
    which are yes/no questions (None when unknown)."""

    texts: list[str]
    normalized: np.ndarray  # object array of normalized texts
    vectors: np.ndarray  # (n, d) unit-length float32
    yes_no: np.ndarray | None = None  # bool per candidate

    def subset(self, mask: np.ndarray) -> Candidates:
        """The candidates where ``mask`` holds (their own n-gram statistics)."""
        keep = np.flatnonzero(mask)
        return Candidates(
            [self.texts[i] for i in keep],
            self.normalized[keep],
            self.vectors[keep],
            None if self.yes_no is None else self.yes_no[keep],
        )

    @cached_property
    def vectors64(self) -> np.ndarray:
        """The embeddings in float64, one C-ordered copy per pool (the paper mode's
        whole-pool optimality check reads them once per round)."""
        return np.ascontiguousarray(self.vectors, dtype=np.float64)

    @cached_property
    def words(self) -> list[list[str]]:
        """Lower-case words of every candidate (:func:`bleu_tokens`)."""
        return [bleu_tokens(t) for t in self.texts]

    @cached_property
    def rouge(self) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
        """ROUGE token ids of every candidate (:func:`vqarobust.text.overlap.token_matrix`)."""
        return overlap.token_matrix(self.texts)

    @cached_property
    def cider(self) -> overlap.CiderIndex:
        """CIDEr-D weights with the pool's document frequencies."""
        vocabularies, matrices, lengths = self.ngrams
        return overlap.CiderIndex(vocabularies, matrices, lengths)

    @cached_property
    def ngrams(self) -> tuple[list[dict[tuple[str, ...], int]], list[Any], np.ndarray]:
        """Per n = 1..4: the n-gram vocabulary and a sparse (pool x vocabulary) count
        matrix (CSC, so the columns of one question's n-grams are cheap to take); and the
        word count of every candidate."""
        from scipy import sparse

        words = self.words
        vocabularies, matrices = [], []
        for n in range(1, MAX_BLEU_N + 1):
            vocab: dict[tuple[str, ...], int] = {}
            rows, cols = [], []
            for i, w in enumerate(words):
                for gram in _ngram_list(w, n):
                    rows.append(i)
                    cols.append(vocab.setdefault(gram, len(vocab)))
            data = np.ones(len(rows), dtype=np.float32)  # duplicates sum: counts
            shape = (len(words), max(1, len(vocab)))
            matrices.append(sparse.csc_matrix((data, (rows, cols)), shape=shape))
            vocabularies.append(vocab)
        return vocabularies, matrices, np.array([len(w) for w in words], dtype=np.float64)


def normalize_question(question: str) -> str:
    """Lower case, VQA answer normalization (punctuation, digits, articles, contractions):
    two questions that differ only there are the same question."""
    return normalize_answer(question.lower())


def _levels(k: int) -> int:
    if k < PER_LEVEL or k % PER_LEVEL:
        raise ValueError(f"k must be a positive multiple of {PER_LEVEL}, got {k}")
    return k // PER_LEVEL


def ranker_name(name: str) -> str:
    """The ranker of a basic-question perturbation (``bq_lasso`` -> ``lasso``)."""
    return BQ_RANKERS.entry(name).tags["ranker"]


# A ranker scores candidates ``idx`` of the pool for one MQ: (mq text, mq vector, pool,
# candidate indices, settings) -> (scores, source per candidate or None, alpha or NaN).
Scores = tuple[np.ndarray, np.ndarray | None, float]


@dataclass(frozen=True)
class RankSettings:
    """How basic questions are ranked: ``k`` per main question; LASSO's ``alpha`` and the
    ``prefilter`` cosine-nearest candidates of its fast mode, its ``lasso_mode`` (fast or
    paper) and the paper mode's ``lasso_lambda``. ``exclude_main``: ``own`` leaves each
    main question out of its own candidates only; ``run`` removes every main question of
    the run from the pool first (the basic-question paper's disjoint pool).
    ``bleu_smoothing``: ``none`` (coco-caption's BLEU) or ``add_one`` (:func:`bleu`)."""

    k: int = DEFAULT_K
    alpha: float = DEFAULT_ALPHA
    prefilter: int = DEFAULT_PREFILTER
    lasso_mode: str = "fast"
    lasso_lambda: float = PAPER_LAMBDA
    exclude_main: str = "own"
    bleu_smoothing: str = "none"


DEFAULT_RANKING = RankSettings()


@BQ_RANKERS.register("bq_cosine", ranker="cosine", **_GENERAL)
def cosine_scores(
    mq: str, vec: np.ndarray, pool: Candidates, idx: np.ndarray, **_: object
) -> Scores:
    """Cosine similarity of the MiniLM embeddings."""
    # Product over the whole pool, then the candidates: no copy of their vectors.
    return (pool.vectors @ vec)[idx], None, float("nan")


@BQ_RANKERS.register("bq_lasso", ranker="lasso", **_GENERAL)
def lasso_scores(
    mq: str,
    vec: np.ndarray,
    pool: Candidates,
    idx: np.ndarray,
    settings: RankSettings = DEFAULT_RANKING,
    **_: object,
) -> Scores:
    """LASSO weights: fast mode non-negative over the ``prefilter`` cosine-nearest
    candidates, paper mode unconstrained over all (:func:`paper_lasso`); the others (zero
    weight) are ranked after them by cosine similarity, marked ``cosine``."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    k, alpha, mode = settings.k, settings.alpha, settings.lasso_mode
    if mode == "paper":
        return paper_lasso(vec, pool, idx, settings.lasso_lambda)
    if mode != "fast":
        raise ValueError(f"lasso mode must be one of {', '.join(LASSO_MODES)}, got {mode!r}")
    cos = (pool.vectors @ vec)[idx]
    near = np.argsort(-cos, kind="stable")[: settings.prefilter]
    a = pool.vectors[idx[near]].T.astype(np.float64)
    weights = np.zeros(len(near))
    for attempt in range(LASSO_RETRIES + 1):
        if attempt:
            alpha /= 10
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = Lasso(alpha=alpha, positive=True, fit_intercept=False, max_iter=5000)
            weights = fit.fit(a, vec.astype(np.float64)).coef_
        # Weights at rounding level (a millionth of the largest) are zeros.
        weights = np.where(weights > 1e-6 * max(weights.max(), 0), weights, 0.0)
        if np.count_nonzero(weights) >= min(k, len(near)):
            break
    # Non-zero weights first; the rest are ranked after them by cosine similarity, which is
    # their score (source "cosine").
    scores = cos.astype(np.float64)
    source = np.full(len(idx), "cosine", dtype=object)
    nonzero = near[weights > 0]
    scores[nonzero] = weights[weights > 0]
    source[nonzero] = "lasso"
    return scores, source, alpha


def paper_lasso(vec: np.ndarray, pool: Candidates, idx: np.ndarray, lam: float) -> Scores:
    """The paper's problem min ||Ax - b||^2 + lam ||x||_1 over every candidate, without a
    sign constraint (scikit-learn's scaling: ``alpha = lam / (2 d)``), solved exactly by
    LARS on a working set checked against the whole pool
    (:func:`vqarobust.text.lasso.lasso_working_set`). Positive weights are the scores;
    the rest (zero or negative) are ranked by cosine after them."""
    if lam <= 0:
        raise ValueError(f"lasso lambda must be positive, got {lam}")
    alpha = lam / (2 * pool.vectors.shape[1])
    weights, _ = lasso.lasso_working_set(pool.vectors64, vec.astype(np.float64), alpha, idx)
    scores = (pool.vectors @ vec)[idx].astype(np.float64)
    source = np.full(len(idx), "cosine", dtype=object)
    chosen = weights > 0
    scores[chosen] = weights[chosen]
    source[chosen] = "lasso"
    return scores, source, alpha


def _ngram_list(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


WORDS = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def bleu_tokens(question: str) -> list[str]:
    """Lower-case words of a question (punctuation dropped)."""
    return WORDS.findall(question.lower())


BLEU_SMOOTHING = ("none", "add_one")
# coco-caption's constants: a precision is (matches + TINY) / (guesses + SMALL), so an
# order without matches gives a tiny factor, not zero.
TINY, SMALL = 1e-15, 1e-9


def bleu(
    mq: str, pool: Candidates, idx: np.ndarray, max_n: int = MAX_BLEU_N, smoothing: str = "none"
) -> np.ndarray:
    """Sentence BLEU-``max_n`` of each candidate ``idx`` (hypothesis) against the MQ
    (reference), every candidate at once from the pool's sparse n-gram counts: matches
    clipped by the reference's counts, the geometric mean of the precisions of n =
    1..max_n, the brevity penalty.

    ``smoothing="none"`` is coco-caption's BLEU (pycocoevalcap's ``BleuScorer``, the
    papers' reference): each precision (matches + 1e-15) / (n-grams + 1e-9), the penalty
    exp(1 - 1 / ratio) with ratio (length + 1e-15) / (reference length + 1e-9), equal to
    its per-sentence score. ``add_one`` is nltk's ``SmoothingFunction().method2`` (add one
    to matches and n-grams for n > 1), kept as a named option: without smoothing a
    candidate that shares no n-gram of some order with a short MQ scores ~1e-4 or less,
    so the ranking among those is set by the constants (docs/text.md)."""
    if not 1 <= max_n <= MAX_BLEU_N:
        raise ValueError(f"BLEU order must be 1..{MAX_BLEU_N}, got {max_n}")
    if smoothing not in BLEU_SMOOTHING:
        raise ValueError(f"BLEU smoothing is one of {BLEU_SMOOTHING}, got {smoothing!r}")
    vocabularies, matrices, lengths = pool.ngrams
    ref = bleu_tokens(mq)
    cand_len = lengths[idx]
    r = len(ref)
    log_p = np.zeros(len(idx))
    product = np.ones(len(idx))
    for n in range(1, max_n + 1):
        vocab, matrix = vocabularies[n - 1], matrices[n - 1]
        counts = [(vocab[g], c) for g, c in Counter(_ngram_list(ref, n)).items() if g in vocab]
        if counts:
            cols, clip = (np.array(v) for v in zip(*counts, strict=True))
            sub = matrix[:, cols].tocsc()  # candidates' counts of the reference's n-grams
            # Clip each column by the reference's count, on the stored values only.
            sub.data = np.minimum(sub.data, np.repeat(clip, np.diff(sub.indptr)))
            matches = np.asarray(sub.sum(axis=1)).ravel()[idx].astype(np.float64)
        else:
            matches = np.zeros(len(idx))
        if smoothing == "none":
            product = product * ((matches + TINY) / (np.maximum(cand_len - n + 1, 0) + SMALL))
            continue
        total = np.maximum(cand_len - n + 1, 1)
        if n == 1:
            with np.errstate(divide="ignore"):
                log_p += np.log(matches / total)
        else:
            log_p += np.log((matches + 1) / (total + 1))
    if smoothing == "none":
        ratio = (cand_len + TINY) / (r + SMALL)
        with np.errstate(divide="ignore", over="ignore"):
            bp = np.where(ratio < 1, np.exp(1 - 1 / ratio), 1.0)
        return product ** (1 / max_n) * bp
    with np.errstate(divide="ignore", over="ignore"):
        bp = np.where(cand_len > r, 1.0, np.exp(1 - r / np.maximum(cand_len, 1)))
    return np.where(np.isfinite(log_p), bp * np.exp(log_p / max_n), 0.0)


@BQ_RANKERS.register("bq_bleu", ranker="bleu", **_GENERAL)
def bleu_scores(
    mq: str,
    vec: np.ndarray,
    pool: Candidates,
    idx: np.ndarray,
    settings: RankSettings = DEFAULT_RANKING,
    **_: object,
) -> Scores:
    """BLEU-4 (:func:`bleu`), the paper's BLEU ranker of the default config."""
    return bleu(mq, pool, idx, 4, settings.bleu_smoothing), None, float("nan")


def _bleu_ranker(n: int) -> Callable[..., Scores]:
    def scores(
        mq: str,
        vec: np.ndarray,
        pool: Candidates,
        idx: np.ndarray,
        settings: RankSettings = DEFAULT_RANKING,
        **_: object,
    ) -> Scores:
        return bleu(mq, pool, idx, n, settings.bleu_smoothing), None, float("nan")

    scores.__doc__ = f"BLEU-{n} (:func:`bleu`), one of the paper's rankers."
    scores.__name__ = f"bleu{n}_scores"
    return scores


# The basic-question paper also ranks with BLEU-1, -2 and -3.
BQ_RANKERS.register("bq_bleu1", ranker="bleu1", **_GENERAL)(_bleu_ranker(1))
BQ_RANKERS.register("bq_bleu2", ranker="bleu2", **_GENERAL)(_bleu_ranker(2))
BQ_RANKERS.register("bq_bleu3", ranker="bleu3", **_GENERAL)(_bleu_ranker(3))


@BQ_RANKERS.register("bq_rouge", ranker="rouge", **_GENERAL)
def rouge_scores(
    mq: str, vec: np.ndarray, pool: Candidates, idx: np.ndarray, **_: object
) -> Scores:
    """coco-caption's ROUGE-L (beta 1.2) on rouge-score's tokens (no stemming)."""
    vocab, ids, lengths = pool.rouge
    return overlap.rouge_l(mq, vocab, ids, lengths)[idx], None, float("nan")


@BQ_RANKERS.register("bq_cider", ranker="cider", **_GENERAL)
def cider_scores(
    mq: str, vec: np.ndarray, pool: Candidates, idx: np.ndarray, **_: object
) -> Scores:
    """CIDEr-D with the pool's document frequencies."""
    return pool.cider.scores(bleu_tokens(mq), idx), None, float("nan")


@BQ_RANKERS.register("bq_meteor", ranker="meteor", **_GENERAL, needs="wordnet")
def meteor_scores(
    mq: str, vec: np.ndarray, pool: Candidates, idx: np.ndarray, **_: object
) -> Scores:
    """nltk's METEOR over WordNet 3.0 (:mod:`vqarobust.text.wordnet`), one pair at a time."""
    from vqarobust.text import wordnet

    words = pool.words
    return (
        overlap.meteor(bleu_tokens(mq), [words[i] for i in idx], wordnet.load()),
        None,
        float("nan"),
    )


DATASETS = ("general", "yes_no")
_DATASET_PREFIX = {"general": "bq_", "yes_no": "ynbq_"}
# Every ranker also ranks the yes/no pool (YNBQD): the same function under a second name.
for _name in BQ_RANKERS.list():
    _entry = BQ_RANKERS.entry(_name)
    _tags = {k: v for k, v in _entry.tags.items() if k != "modality"} | {"dataset": "yes_no"}
    BQ_RANKERS.register("yn" + _name, **_tags)(_entry.obj)
del _name, _entry, _tags


def bq_dataset(name: str) -> str:
    """The basic-question dataset a perturbation ranks (``general`` or ``yes_no``)."""
    return BQ_RANKERS.entry(name).tags["dataset"]


def perturbation_name(ranker: str, dataset: str) -> str:
    """The perturbation of a general ranker name (``bq_lasso``) on a dataset
    (``yes_no`` -> ``ynbq_lasso``)."""
    if dataset not in DATASETS:
        raise ValueError(
            f"basic-question dataset must be one of {', '.join(DATASETS)}, got {dataset!r}"
        )
    if bq_dataset(ranker) != "general":
        raise ValueError(f"{ranker} is not a general ranker name (bq_...)")
    return _DATASET_PREFIX[dataset] + ranker.removeprefix("bq_")


def ranker_family(name: str) -> str:
    """The perturbation family of a basic-question perturbation: its ranker, marked for
    the yes/no dataset (``lasso``, ``yn_lasso``)."""
    r = ranker_name(name)
    return r if bq_dataset(name) == "general" else f"yn_{r}"


def describe_ranker(
    name: str, settings: RankSettings = DEFAULT_RANKING, encoder: str | None = None
) -> str:
    """How ``name`` ranks, in words: the method and, for LASSO, its mode and settings (the
    ``method`` column of rankings, the ``ranking`` column of the R_score tables).
    ``encoder`` names the sentence encoder of the embedding rankers (LASSO, cosine)."""
    ranker = ranker_name(name)
    on = f" on {encoder} embeddings" if encoder else ""
    if ranker == "lasso" and settings.lasso_mode == "paper":
        text = (
            f"LASSO, paper mode: unconstrained, lambda {settings.lasso_lambda:g}, the whole "
            f"pool (LARS){on}"
        )
    elif ranker == "lasso":
        text = (
            f"LASSO, fast mode: non-negative, alpha {settings.alpha:g}, the "
            f"{settings.prefilter} cosine-nearest candidates{on}"
        )
    elif ranker == "cosine":
        text = f"cosine similarity{on}"
    elif ranker.startswith("bleu"):
        n = ranker.removeprefix("bleu") or str(MAX_BLEU_N)
        smoothing = (
            "coco-caption, no smoothing"
            if settings.bleu_smoothing == "none"
            else "add-one smoothing (nltk method2)"
        )
        text = f"BLEU-{n}, {smoothing}"
    else:
        text = {
            "rouge": "ROUGE-L, coco-caption (beta 1.2)",
            "cider": "CIDEr-D, the pool's document frequencies",
            "meteor": "METEOR (nltk, WordNet 3.0)",
        }.get(ranker, ranker)
    if bq_dataset(name) == "yes_no":
        text += "; yes/no pool"
    if settings.exclude_main == "run":
        text += "; every main question removed from the pool"
    return text


def needs(name: str) -> str | None:
    """What a ranker needs beyond the pool (``wordnet`` for METEOR, or None)."""
    return BQ_RANKERS.entry(name).tags.get("needs")


def make_pool(
    pool: Sequence[str], encode: Callable[[list[str]], np.ndarray] | None = None
) -> Candidates:
    """Distinct pool questions (first spelling of each normalized form kept) and their
    embeddings (``encode``; default the shipped MiniLM)."""
    texts = list(dict.fromkeys(q.strip() for q in pool if q and q.strip()))
    normalized = np.array([normalize_question(t) for t in texts], dtype=object)
    _, first = np.unique(normalized, return_index=True)
    keep = np.sort(first)
    texts = [texts[i] for i in keep]
    normalized = normalized[keep]
    if encode is None:
        from vqarobust.text.encoder import encode
    return Candidates(texts, normalized, np.asarray(encode(texts), dtype=np.float32))


def rank_table(
    questions: Sequence[str],
    pool: Sequence[str] | Candidates,
    rankers: Sequence[str] = ("bq_lasso",),
    settings: RankSettings = DEFAULT_RANKING,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> pl.DataFrame:
    """The top ``settings.k`` basic questions of each distinct main question, per ranker
    (``RANKING_SCHEMA``); a ``ynbq_*`` ranker ranks only the pool's yes/no questions. A
    pool with fewer than ``k`` usable candidates is an error."""
    k = settings.k
    _levels(k)
    for name in rankers:
        BQ_RANKERS.entry(name)
    if not isinstance(pool, Candidates):
        pool = make_pool(pool, encode)
    mqs = list(dict.fromkeys(questions))
    if settings.exclude_main not in ("own", "run"):
        raise ValueError(f"exclude_main is own or run, got {settings.exclude_main!r}")
    if settings.exclude_main == "run":
        main = np.isin(pool.normalized, [normalize_question(q) for q in mqs])
        log.info(
            "removed %d of the pool's %d questions that are main questions of the run",
            int(main.sum()),
            len(main),
        )
        pool = pool.subset(~main)
    pools = {"general": pool}
    if any(bq_dataset(n) == "yes_no" for n in rankers):
        if pool.yes_no is None:
            raise ValueError(
                "the yes/no basic-question dataset needs to know which pool "
                "questions are yes/no questions"
            )
        pools["yes_no"] = pool.subset(pool.yes_no)
    if encode is None:
        from vqarobust.text.encoder import encode as encode_default

        encode = encode_default
    mq_vecs = encode(mqs) if mqs else np.zeros((0, pool.vectors.shape[1]), np.float32)
    rows: dict[str, list] = {c: [] for c in RANKING_SCHEMA}
    methods = {name: describe_ranker(name, settings) for name in rankers}
    timings = dict.fromkeys(rankers, 0.0)
    progress = Progress("basic-question ranking", len(mqs), "main questions", log)
    for mq, vec in zip(mqs, mq_vecs, strict=True):
        key = normalize_question(mq)
        for name in rankers:
            dataset = bq_dataset(name)
            candidates = pools[dataset]
            idx = np.flatnonzero(candidates.normalized != key)
            if len(idx) < k:
                what = "yes/no pool" if dataset == "yes_no" else "pool"
                raise ValueError(
                    f"the basic-question {what} has {len(idx)} candidates for {mq!r}, fewer "
                    f"than k={k}; add questions to the pool (basic_questions.pool, "
                    "basic_questions.pool_files) or lower k"
                )
            t = time.perf_counter()
            scores, source, used_alpha = BQ_RANKERS.get(name)(
                mq, vec, candidates, idx, settings=settings
            )
            # A ranker's own scores come before fills; ties broken by pool order, so
            # rankings are deterministic.
            fill = (
                (source == "cosine") if source is not None and ranker_name(name) != "cosine" else 0
            )
            top = np.lexsort((idx, -scores, np.asarray(fill, dtype=np.int8) * np.ones(len(idx))))
            top = top[:k]
            timings[name] += time.perf_counter() - t
            rows["question"] += [mq] * k
            rows["ranker"] += [name] * k
            rows["rank"] += list(range(1, k + 1))
            rows["basic_question"] += [candidates.texts[i] for i in idx[top]]
            rows["score"] += scores[top].tolist()
            rows["source"] += list(source[top]) if source is not None else [ranker_name(name)] * k
            rows["alpha"] += [used_alpha] * k
            rows["method"] += [methods[name]] * k
        progress.advance()
    for name, seconds in timings.items():
        log.info("%s: %d main questions ranked in %.2fs", name, len(mqs), seconds)
    return pl.DataFrame(rows, schema=RANKING_SCHEMA)


def noisy_question(mq: str, basic: Sequence[str]) -> str:
    """The main question followed by its basic questions, one space apart."""
    return " ".join([mq.strip(), *(b.strip() for b in basic)])


# VQABQ's chain of questions for generative and chat models: the basic questions first,
# then the main question. A model entry (or its repository entry) may set chain_prompt.
DEFAULT_CHAIN_PROMPT = "{basic_questions} {question}"
# The paper's direct concatenation, what every other model is asked: the main question,
# then its basic questions.
CONCAT_PROMPT = "{question} {basic_questions}"
# VQABQ's subset: each main question with its first n = 1, 2, 3 basic questions (severity
# n), so that Algorithm 1 can keep any of them (vqarobust.metrics.vqabq).
CHAIN = "vqabq_chain"


@PERTURBATIONS.register(CHAIN, modality="vqabq", severities=PER_LEVEL)
def chain_question(mq: str, basic: Sequence[str], template: str = DEFAULT_CHAIN_PROMPT) -> str:
    """The chain-of-questions text of ``template`` (``{basic_questions}``, joined by
    spaces, and ``{question}``)."""
    check_chain_prompt(template)
    joined = " ".join(b.strip() for b in basic)
    return template.format(basic_questions=joined, question=mq.strip()).strip()


def check_chain_prompt(template: str) -> None:
    """A chain prompt names both parts, and nothing else."""
    import string

    fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    if fields != {"basic_questions", "question"}:
        raise ValueError(
            "a chain prompt must contain {basic_questions} and {question} (and no "
            f"other field), got {template!r}"
        )


def basic_questions(
    questions: Sequence[str],
    pool: Sequence[str],
    k: int = DEFAULT_K,
    ranker: str = "lasso",
    **settings: float,
) -> list[list[str]]:
    """For each question, its ``k`` basic questions from ``pool``, most similar first.
    ``ranker``: lasso, cosine or bleu."""
    name = ranker if ranker.startswith("bq_") else f"bq_{ranker}"
    table = rank_table(questions, pool, [name], RankSettings(k=k, **settings))  # type: ignore[arg-type]
    by_mq = {
        row["question"]: row["basic_question"]
        for row in table.group_by("question", maintain_order=True)
        .agg(pl.col("basic_question").sort_by("rank"))
        .iter_rows(named=True)
    }
    return [list(by_mq[q]) for q in questions]

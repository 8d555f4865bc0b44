"""Time of basic-question ranking: on the easy-VQA pool, and per main question on a
larger generated pool, extrapolated to the paper's 186,027-question pool and 16,000 main
questions; and how often LASSO's fast mode agrees with the paper mode.

    .venv/bin/python benchmarks/basic_questions.py [pool_size] [n_main_questions] [n_slow]
    .venv/bin/python benchmarks/basic_questions.py paper [pool_size] [n_main_questions] [n_check]

The second form measures the paper mode alone at the paper's pool size (default 186,027
generated questions, 200 distinct main questions): seconds per main question (mean,
median, 90th percentile, the most), the 16,000-question study extrapolated from them, and
on the first ``n_check`` main questions (default 2) scikit-learn's LARS over the whole
pool, both as the code called it before (``LassoLars`` on the paper's alpha, which stops
short of it) and exactly (b scaled by 1 / alpha): their time, where the former stopped,
and the largest difference of the exact weights from the working set's. Encoding the pool
is the first 17 minutes of it; ``VQAROBUST_BENCH_CACHE=DIR`` keeps the embeddings there,
keyed by the SHA-256 of the pool's text and the encoder, for a rerun.

The larger pool (default 20,000 distinct questions) is generated from easy-VQA's and
VQAv2-style questions by the text perturbations (distinct strings; what matters for the
time is their number), and so are the distinct main questions. Encoding throughput is
measured on the pool; per ranker, the seconds per distinct main question (each is ranked
once, however many images ask it). The estimate for a 200,000-question pool scales the
pool-proportional part (the cosine product over the pool, BLEU's sparse n-gram sums)
linearly and keeps LASSO's part (the pre-filtered 300 candidates) constant; every other
ranker's time grows with the pool (ROUGE-L and CIDEr-D are vectorized over it, METEOR
scores one pair at a time), so it is scaled linearly. METEOR is timed on the first
``n_slow`` main questions (default 20). The paper mode is measured by the second form, not
extrapolated. Agreement (second form): per main question, the overlap of the two modes'
top 21 (overlap@21) and Spearman's correlation of their ranks over the union of the two
lists (rank 22 for a question one list lacks). One thread, as a workflow job.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vqarobust import text  # noqa: E402
from vqarobust.text import lasso  # noqa: E402
from vqarobust.text import ranking as bq  # noqa: E402
from vqarobust.text.encoder import ENCODER_NAME, encode  # noqa: E402

RANKERS = (
    "bq_lasso",
    "bq_cosine",
    "bq_bleu1",
    "bq_bleu2",
    "bq_bleu3",
    "bq_bleu",
    "bq_rouge",
    "bq_cider",
)
SLOW = ("bq_meteor",)  # timed on fewer main questions
PAPER_POOL, PAPER_MQS = 186_027, 16_000
VQAV2_LIKE = [
    "What is the man holding in his right hand?",
    "How many people are standing near the large wooden table?",
    "Is the woman on the left wearing a hat or a scarf?",
    "What kind of animal is sleeping on the brown couch?",
    "What color is the bus parked next to the building?",
    "Is there a clock on the tower?",
    "What sport is being played in this picture?",
    "Are the lights on in the kitchen?",
]


def easy_vqa_questions() -> tuple[list[str], list[str]]:
    from easy_vqa import get_test_questions, get_train_questions

    test = get_test_questions()[0]
    return list(dict.fromkeys(test)), list(dict.fromkeys([*get_train_questions()[0], *test]))


def generated_pool(size: int, seeds: list[str]) -> list[str]:
    names = text.names(available=True)
    pool: dict[str, None] = dict.fromkeys(seeds)
    k = 0
    while len(pool) < size:
        q = seeds[k % len(seeds)]
        name = names[(k // len(seeds)) % len(names)]
        pool[text.perturb(q, name, 1 + k % 5, seed=k)] = None
        k += 1
    return list(pool)[:size]


def time_rankers(mqs: list[str], pool: bq.Candidates, encoder, names=RANKERS) -> dict[str, float]:
    """Seconds per distinct main question (rank_table ranks each distinct one once)."""
    from vqarobust.text.wordnet import wordnet_dir

    distinct = list(dict.fromkeys(mqs))
    out = {}
    for name in names:
        if name == "bq_meteor" and wordnet_dir() is None:
            continue
        t = time.perf_counter()
        bq.rank_table(distinct, pool, [name], bq.RankSettings(), encode=encoder)
        out[name] = (time.perf_counter() - t) / len(distinct)
    return out


def agreement(
    mqs: list[str], pool: bq.Candidates, encoder, paper, k: int = 21
) -> tuple[float, float]:
    """Mean overlap@k and mean Spearman correlation of the fast mode's top k and the paper
    mode's (``paper``, its rankings)."""
    from scipy import stats

    fast = bq.rank_table(mqs, pool, ["bq_lasso"], bq.RankSettings(k), encode=encoder)
    overlaps, rhos = [], []
    for mq in dict.fromkeys(mqs):
        a = fast.filter(question=mq).sort("rank")["basic_question"].to_list()
        b = paper.filter(question=mq).sort("rank")["basic_question"].to_list()
        overlaps.append(len(set(a) & set(b)) / k)
        union = list(dict.fromkeys(a + b))
        ra = [a.index(q) + 1 if q in a else k + 1 for q in union]
        rb = [b.index(q) + 1 if q in b else k + 1 for q in union]
        rhos.append(stats.spearmanr(ra, rb).statistic)
    return float(np.mean(overlaps)), float(np.nanmean(rhos))


def one_thread() -> None:
    """One thread for torch and for numpy's BLAS, as a workflow job with ``threads: 1``
    (Snakemake sets OMP_NUM_THREADS and the like for it)."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)


def main(pool_size: int = 20000, n_main: int = 200, n_slow: int = 20) -> None:
    one_thread()
    mqs, easy_pool = easy_vqa_questions()
    t = time.perf_counter()
    pool = bq.make_pool(easy_pool)
    mq_vectors = {q: v for q, v in zip(mqs, encode(mqs), strict=True)}
    encode_easy = time.perf_counter() - t
    lookup = lambda s: np.array([mq_vectors[q] for q in s])  # noqa: E731
    per_mq = time_rankers(mqs, pool, lookup)
    print(
        f"easy-VQA: {len(mqs)} distinct main questions, pool of {len(pool.texts)} distinct "
        f"questions; encoding {encode_easy:.2f} s"
    )
    for name, sec in per_mq.items():
        print(f"  {name}: {sec * len(mqs):.2f} s in all ({sec * 1e3:.1f} ms per main question)")

    seeds = [*easy_pool, *VQAV2_LIKE]
    big = generated_pool(pool_size, seeds)
    t = time.perf_counter()
    vectors = encode(big)
    rate = len(big) / (time.perf_counter() - t)
    large = bq.Candidates(
        big, np.array([bq.normalize_question(q) for q in big], dtype=object), vectors
    )
    # Distinct main questions (a repeated one is ranked once), drawn like the pool: some
    # are in it, as the eval split's questions are in the paper's pool.
    main_qs = generated_pool(n_main, VQAV2_LIKE)
    extra = [q for q in main_qs if q not in set(big)]
    table = {
        q: v
        for q, v in zip(
            [*big, *extra], np.vstack([vectors, encode(extra)]) if extra else vectors, strict=True
        )
    }
    lookup_big = lambda s: np.array([table[q] for q in s])  # noqa: E731
    large.ngrams  # built once per pool, timed apart  # noqa: B018
    t = time.perf_counter()
    _ = bq.Candidates(large.texts, large.normalized, large.vectors).ngrams
    ngram_build = time.perf_counter() - t
    big_per_mq = time_rankers(main_qs, large, lookup_big)
    big_per_mq |= time_rankers(main_qs[:n_slow], large, lookup_big, SLOW)
    scale = PAPER_POOL / len(big)
    print(
        f"\ngenerated pool of {len(big):,} questions, {len(main_qs)} distinct main "
        f"questions ({n_slow} for {', '.join(SLOW)}): encoding {rate:,.0f} questions/s; "
        f"BLEU n-gram index built in {ngram_build:.1f} s"
    )
    lasso_fixed = max(big_per_mq["bq_lasso"] - big_per_mq["bq_cosine"], 0.0)
    for name, sec in big_per_mq.items():
        # LASSO: the pool-wide cosine part scales, the pre-filtered fit does not.
        est = big_per_mq["bq_cosine"] * scale + lasso_fixed if name == "bq_lasso" else sec * scale
        print(
            f"  {name}: {sec * 1e3:.1f} ms per main question; {PAPER_POOL:,}-question pool: "
            f"~{est * 1e3:.0f} ms per main question, ~{est * PAPER_MQS / 3600:.1f} h for "
            f"{PAPER_MQS:,} main questions"
        )
    print(
        f"  encoding {PAPER_POOL:,} pool questions: ~{PAPER_POOL / rate / 60:.0f} min (once "
        "per pool file)"
    )


def encoded(texts: list[str]) -> np.ndarray:
    """``encode(texts)``, kept under ``$VQAROBUST_BENCH_CACHE`` when it is set."""
    cache = os.environ.get("VQAROBUST_BENCH_CACHE")
    key = hashlib.sha256("\n".join([ENCODER_NAME, *texts]).encode()).hexdigest()[:16]
    path = Path(cache) / f"embeddings-{key}.npy" if cache else None
    if path is not None and path.exists():
        return np.load(path)
    vectors = encode(texts)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def paper_scale(pool_size: int = PAPER_POOL, n_main: int = 200, n_check: int = 2) -> None:
    """The paper mode alone at the paper's pool size (the module docstring)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LassoLars

    one_thread()
    _, easy_pool = easy_vqa_questions()
    t = time.perf_counter()
    big = generated_pool(pool_size, [*easy_pool, *VQAV2_LIKE])
    generated = time.perf_counter() - t
    t = time.perf_counter()
    vectors = encoded(big)
    encoding = time.perf_counter() - t
    main_qs = generated_pool(n_main, VQAV2_LIKE)
    table = dict(zip(big, vectors, strict=True))
    extra = [q for q in main_qs if q not in table]
    table |= dict(zip(extra, encode(extra) if extra else [], strict=True))
    lookup = lambda s: np.array([table[q] for q in s])  # noqa: E731
    pool = bq.Candidates(
        big, np.array([bq.normalize_question(q) for q in big], dtype=object), vectors
    )
    t = time.perf_counter()
    pool.vectors64  # once per pool  # noqa: B018
    to64 = time.perf_counter() - t
    paper = bq.RankSettings(lasso_mode="paper")
    seconds, tables = [], []
    for mq in main_qs:
        t = time.perf_counter()
        tables.append(bq.rank_table([mq], pool, ["bq_lasso"], paper, encode=lookup))
        seconds.append(time.perf_counter() - t)
    sec = np.array(seconds)
    print(
        f"paper mode, generated pool of {len(big):,} distinct questions (generated in "
        f"{generated:.0f} s, encoded in {encoding:.0f} s; float64 copy {to64:.2f} s), "
        f"{len(main_qs)} distinct main questions"
    )
    print(
        f"  per main question: mean {sec.mean():.2f} s, median {np.median(sec):.2f} s, "
        f"90th percentile {np.percentile(sec, 90):.2f} s, most {sec.max():.2f} s; "
        f"{sec.sum() / 60:.1f} min in all"
    )
    print(
        f"  {PAPER_MQS:,} main questions: ~{sec.mean() * PAPER_MQS / 3600:.0f} CPU-hours "
        "(per dataset)"
    )
    import polars as pl

    overlap, rho = agreement(main_qs, pool, lookup, pl.concat(tables))
    print(
        f"  LASSO fast vs paper mode over the {len(main_qs)}: overlap@21 {overlap:.3f}, "
        f"Spearman of the ranks over the two top-21 lists {rho:.3f}"
    )
    d = vectors.shape[1]
    alpha = bq.PAPER_LAMBDA / (2 * d)
    for mq in main_qs[:n_check]:
        idx = np.flatnonzero(pool.normalized != bq.normalize_question(mq))
        b = lookup([mq])[0].astype(np.float64)
        a = pool.vectors64[idx].T
        t = time.perf_counter()
        ours, rounds = lasso.lasso_working_set(pool.vectors64, b, alpha, idx)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            before = LassoLars(alpha=alpha, fit_intercept=False, max_iter=20 * d).fit(a, b).coef_
        t_before = time.perf_counter() - t
        t = time.perf_counter()
        whole = lasso._lars(a, b, alpha)
        t_whole = time.perf_counter() - t
        stopped = np.abs(a.T @ (b - a @ before)).max() / d / alpha
        print(
            f"  {mq!r}: working set {t_ours:.1f} s ({rounds} rounds, "
            f"{np.count_nonzero(ours)} non-zero weights); exact LARS over the whole pool "
            f"{t_whole:.1f} s, largest weight difference {np.abs(whole - ours).max():.1e}; "
            f"LassoLars as called before {t_before:.1f} s, stopped at {stopped:.0f} x the "
            f"paper's alpha ({np.count_nonzero(before)} non-zero weights)"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["paper"]:
        paper_scale(*(int(a) for a in sys.argv[2:]))
    else:
        main(*(int(a) for a in sys.argv[1:]))

"""Time of basic-question ranking: on the easy-VQA pool, and per main question on a
larger generated pool, extrapolated to a 200,000-question pool.

    .venv/bin/python benchmarks/basic_questions.py [pool_size] [n_main_questions]

The larger pool (default 20,000 distinct questions) is generated from easy-VQA's and
VQAv2-style questions by the text perturbations (distinct strings; what matters for the
time is their number), and so are the distinct main questions. Encoding throughput is
measured on the pool; per ranker, the seconds per distinct main question (each is ranked
once, however many images ask it). The estimate for a 200,000-question pool scales the
pool-proportional part (the cosine product over the pool, BLEU's sparse n-gram sums)
linearly and keeps LASSO's part (the pre-filtered 300 candidates) constant. One thread,
as a workflow job.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vqarobust import text  # noqa: E402
from vqarobust.text import ranking as bq  # noqa: E402
from vqarobust.text.encoder import encode  # noqa: E402

RANKERS = ("bq_lasso", "bq_cosine", "bq_bleu1", "bq_bleu2", "bq_bleu3", "bq_bleu")
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


def time_rankers(mqs: list[str], pool: bq.Candidates, encoder) -> dict[str, float]:
    """Seconds per distinct main question (rank_table ranks each distinct one once)."""
    distinct = list(dict.fromkeys(mqs))
    out = {}
    for name in RANKERS:
        t = time.perf_counter()
        bq.rank_table(distinct, pool, [name], encode=encoder)
        out[name] = (time.perf_counter() - t) / len(distinct)
    return out


def main(pool_size: int = 20000, n_main: int = 200) -> None:
    torch.set_num_threads(1)
    mqs, easy_pool = easy_vqa_questions()
    t = time.perf_counter()
    pool = bq.make_pool(easy_pool)
    mq_vectors = {q: v for q, v in zip(mqs, encode(mqs), strict=True)}
    encode_easy = time.perf_counter() - t
    lookup = lambda s: np.array([mq_vectors[q] for q in s])  # noqa: E731
    per_mq = time_rankers(mqs, pool, lookup)
    print(f"easy-VQA: {len(mqs)} distinct main questions, pool of {len(pool.texts)} distinct "
          f"questions; encoding {encode_easy:.2f} s")  # fmt: skip
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
    table = {q: v for q, v in zip([*big, *extra], np.vstack([vectors, encode(extra)])
                                  if extra else vectors, strict=True)}  # fmt: skip
    lookup_big = lambda s: np.array([table[q] for q in s])  # noqa: E731
    large.ngrams  # built once per pool, timed apart  # noqa: B018
    t = time.perf_counter()
    _ = bq.Candidates(large.texts, large.normalized, large.vectors).ngrams
    ngram_build = time.perf_counter() - t
    big_per_mq = time_rankers(main_qs, large, lookup_big)
    scale = 200_000 / len(big)
    print(f"\ngenerated pool of {len(big):,} questions, {len(main_qs)} distinct main "
          f"questions: encoding {rate:,.0f} questions/s; BLEU n-gram index built in "
          f"{ngram_build:.1f} s")  # fmt: skip
    lasso_fixed = max(big_per_mq["bq_lasso"] - big_per_mq["bq_cosine"], 0.0)
    for name, sec in big_per_mq.items():
        # LASSO: the pool-wide cosine part scales, the pre-filtered fit does not.
        est = big_per_mq["bq_cosine"] * scale + lasso_fixed if name == "bq_lasso" else sec * scale
        print(f"  {name}: {sec * 1e3:.1f} ms per main question; 200,000-question pool: "
              f"~{est * 1e3:.0f} ms per main question, ~{est * 16000 / 60:.0f} min for "
              "16,000 main questions")  # fmt: skip
    print(f"  encoding 200,000 pool questions: ~{200_000 / rate / 60:.0f} min (once per pool)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))

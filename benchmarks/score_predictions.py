"""Throughput of vectorized VQA scoring on synthetic predictions with realistic answers.

    .venv/bin/python benchmarks/score_predictions.py [n_predictions] [n_questions]

Defaults: 5,000,000 predictions over 200,000 questions with 10 human answers each
(25 predictions per question, like 5 models x 5 subsets). Answers are drawn from a
VQA-like vocabulary with the surface variants normalization must fold ("Yes", "yes.",
"two", "2", "a dog", "the dog", "hot-dog", "1,000", ...). Goal: 5 M in under 60 s on 2 cores.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import polars as pl

from vqarobust.metrics import score_predictions

BASE = [
    "yes",
    "no",
    "2",
    "1",
    "3",
    "white",
    "red",
    "blue",
    "black",
    "green",
    "dog",
    "cat",
    "tennis",
    "baseball",
    "kitchen",
    "pizza",
    "frisbee",
    "umbrella",
    "skateboarding",
    "giraffe",
    "0",
    "4",
    "10",
    "man",
    "woman",
    "left",
    "right",
    "table",
    "snow",
    "wood",
    "hot dog",
    "cell phone",
    "fire hydrant",
    "stop sign",
    "1000",
    "3.5",
    "don't know",
]
VARIANTS = {
    "yes": ["Yes", "yes.", "YES!"],
    "no": ["No", "no."],
    "2": ["two", "Two"],
    "1": ["one"],
    "3": ["three"],
    "4": ["four"],
    "10": ["ten"],
    "0": ["zero", "none"],
    "dog": ["a dog", "the dog", "Dog."],
    "cat": ["a cat"],
    "hot dog": ["hot-dog", "hotdog"],
    "1000": ["1,000"],
    "don't know": ["dont know"],
    "man": ["a man", "the man"],
}


def synthetic(n_pred: int, n_q: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Questions with 10 answers and predictions, both drawn from the same vocabulary."""
    rng = np.random.default_rng(seed)
    surface = [*BASE, *(v for vs in VARIANTS.values() for v in vs)]
    surface += [f"object {i}" for i in range(3000)]  # long tail of rare answers
    n_variants = len(surface) - len(BASE) - 3000
    p = np.r_[np.full(len(BASE), 20.0), np.full(n_variants, 5.0), np.full(3000, 0.05)]
    p /= p.sum()
    vocab = np.array(surface, dtype=object)
    truth = rng.choice(len(vocab), size=n_q, p=p)
    # Human answers agree with the question's main answer about 70% of the time.
    agree = rng.random((n_q, 10)) < 0.7
    other = rng.choice(len(vocab), size=(n_q, 10), p=p)
    answers = np.where(agree, truth[:, None], other)
    questions = pl.DataFrame(
        {"question_id": np.arange(n_q), "answers": vocab[answers].tolist()},
        schema={"question_id": pl.Int64, "answers": pl.List(pl.String)},
    )
    qid = rng.integers(0, n_q, n_pred)
    right = rng.random(n_pred) < 0.6
    pred = np.where(right, truth[qid], rng.choice(len(vocab), size=n_pred, p=p))
    predictions = pl.DataFrame({"question_id": qid, "answer": vocab[pred].tolist()})
    return predictions, questions


def main(n_pred: int = 5_000_000, n_q: int = 200_000) -> None:
    t0 = time.perf_counter()
    predictions, questions = synthetic(int(n_pred), int(n_q))
    print(
        f"generated {predictions.height:,} predictions / {questions.height:,} questions "
        f"in {time.perf_counter() - t0:.1f}s"
    )
    for metric in ("vqa_accuracy", "vqa_accuracy_both", "exact_match"):
        t0 = time.perf_counter()
        scored = score_predictions(predictions, questions, metric)
        dt = time.perf_counter() - t0
        print(
            f"{metric:17s} {dt:6.1f}s  {predictions.height / dt:12,.0f} predictions/s  "
            f"mean score {scored['score'].mean():.4f}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Prediction files written by hand for the database and report tests: each model answers
a set share of the questions right at each severity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from vqarobust import store


def write_predictions(
    folder: Path,
    questions: list[dict],
    model: str,
    perturbation: str,
    severities: list[int],
    correct_share: Callable[[int], float],
    modality: str | None = None,
) -> Path:
    """``model``'s predictions on ``perturbation`` at ``severities``, stored under
    ``folder``: the first ``correct_share(severity)`` of ``questions`` get their first
    answer, the others "wrong"."""
    modality = modality or ("clean" if perturbation == "clean" else "image")
    rows = []
    for sev in severities:
        share = correct_share(sev)
        for i, q in enumerate(questions):
            ok = i < round(share * len(questions))
            answer = q["answers"][0] if ok else "wrong"
            rows.append((q["question_id"], answer, model, modality, perturbation, sev, False))
    columns = [
        "question_id",
        "answer",
        "model",
        "modality",
        "perturbation",
        "severity",
        "truncated",
    ]
    df = pl.DataFrame(rows, schema=columns, orient="row").with_columns(
        pl.col("severity").cast(pl.Int16)
    )
    path = folder / f"{model}-{perturbation}.parquet"
    store.write_table(df.to_arrow(), path)
    return path

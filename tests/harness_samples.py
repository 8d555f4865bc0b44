"""lmms-eval sample logs made from a run's own predictions, for the tests that import
answers from another harness (tests/test_harness_import.py, tests/test_lmms_eval.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from vqarobust.harness_logs import task_name

DATE = "20261206_151500"  # lmms-eval's %Y%m%d_%H%M%S


def logs_from_predictions(predictions: Path, out: Path) -> int:
    """lmms-eval sample logs of every subset of a model's predictions files, each record
    naming its question (``submission``), documents in the files' order; the number of
    tasks."""
    out.mkdir(parents=True)
    tasks = 0
    for path in sorted(predictions.glob("*.parquet")):
        frame = pl.read_parquet(path)
        for (perturbation, severity), part in frame.group_by(
            "perturbation", "severity", maintain_order=True
        ):
            lines = [
                json.dumps(
                    {
                        "doc_id": doc_id,
                        "target": "",
                        "filtered_resps": row["answer"] or "",
                        "exact_match": 0.0,
                        "submission": {"question_id": row["question_id"]},
                    }
                )
                for doc_id, row in enumerate(part.iter_rows(named=True))
            ]
            name = f"{DATE}_samples_{task_name(perturbation, severity)}.jsonl"
            (out / name).write_text("\n".join(lines) + "\n")
            tasks += 1
    return tasks

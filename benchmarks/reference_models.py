"""Clean accuracy of the trained reference models on the whole easy-VQA test split.

Run on the shipped reference checkpoints (or on a folder of trained models):

    .venv/bin/python benchmarks/reference_models.py [checkpoints/easy-vqa]

Prints accuracy (VQA accuracy = exact match on easy-VQA) and questions per second.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from vqarobust.datasets import PreparedOutputs, prepare_dataset
from vqarobust.inference import Subset, predict_subset
from vqarobust.metrics import score_predictions
from vqarobust.models import load_model
from vqarobust.store import read_questions


def main(models_dir: str = "checkpoints/easy-vqa") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        q_path, img_dir = Path(tmp) / "q.parquet", Path(tmp) / "images"
        prepare_dataset(
            "easy-vqa",
            PreparedOutputs(
                q_path, img_dir, Path(tmp) / "manifest.txt", Path(tmp) / "dataset.json"
            ),
            split="test",
        )
        questions = read_questions(q_path)
        q_df = pl.from_arrow(questions)
        print(f"easy-VQA test split: {questions.num_rows} questions")
        for path in sorted(p for p in Path(models_dir).iterdir() if p.is_dir()):
            model = load_model(
                {"family": "vqa-classifier", "path_or_id": str(path), "batch_size": 256}
            )
            t0 = time.perf_counter()
            preds = predict_subset(model, questions, Subset("clean", 0, str(img_dir)), path.name)
            dt = time.perf_counter() - t0
            acc = score_predictions(pl.from_arrow(preds), q_df)["score"].mean()
            print(f"{path.name:12s} accuracy {acc:.4f}  ({questions.num_rows / dt:.0f} q/s)")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Run one model over several image subsets of a dataset and collect its predictions."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from PIL import Image

from vqarobust import store
from vqarobust.models import load_model
from vqarobust.models.base import VQAModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Subset:
    """One perturbed version of the dataset's images."""

    corruption: str
    severity: int
    images_dir: str


def pick_device() -> str:
    """``cuda`` when a GPU is visible to torch, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def predict_subset(
    model: VQAModel, questions: pa.Table, subset: Subset, model_name: str
) -> pa.Table:
    """Answer every question about the subset's images; a table of PREDICTION_SCHEMA."""
    images = {
        row["image_id"]: Image.fromarray(store.decode_image(row["bytes"]))
        for row in store.iter_images(subset.images_dir)
    }
    image_ids = questions.column("image_id").to_pylist()
    missing = sorted({i for i in image_ids if i not in images})
    if missing:
        raise ValueError(
            f"{subset.images_dir}: {len(missing)} images asked about are missing, "
            f"e.g. {missing[:10]}"
        )
    answers = model.answer_all(
        [images[i] for i in image_ids], questions.column("question").to_pylist()
    )
    n = questions.num_rows
    return pa.table(
        {
            "question_id": questions.column("question_id"),
            "answer": pa.array(answers, pa.string()),
            "model": pa.array([model_name] * n, pa.string()),
            "corruption": pa.array([subset.corruption] * n, pa.string()),
            "severity": pa.array([subset.severity] * n, pa.int8()),
        },
        schema=store.PREDICTION_SCHEMA,
    )


def run_inference(
    model_name: str,
    spec: dict[str, Any],
    questions_path: str | os.PathLike[str],
    subsets: Sequence[Subset],
    out_path: str | os.PathLike[str],
    device: str | None = None,
) -> int:
    """Load the model once, answer every question on every subset, write one Parquet file.

    Returns the number of predictions written.
    """
    questions = store.read_questions(questions_path)
    device = device or pick_device()
    t0 = time.perf_counter()
    model = load_model(spec, name=model_name, device=device)
    log.info("loaded %s on %s in %.1fs", model_name, device, time.perf_counter() - t0)
    tables = []
    for subset in subsets:
        t = time.perf_counter()
        tables.append(predict_subset(model, questions, subset, model_name))
        dt = time.perf_counter() - t
        log.info(
            "%s %s/%d: %d questions in %.1fs (%.0f q/s)",
            model_name, subset.corruption, subset.severity,
            questions.num_rows, dt, questions.num_rows / max(dt, 1e-9),
        )  # fmt: skip
    table = pa.concat_tables(tables)
    store.write_table(table, out_path)
    return table.num_rows

"""Attention maps of one model over the clean and every corrupted image of a few questions
(the visual-robustness paper's Figure 5; docs/metrics.md, "Attention shift").

One job per model loads it once and, for the report's sample questions and a seeded
sample of ``n`` more, asks each adapter for the attention of its answer position over the
image (:meth:`vqarobust.models.base.VQAModel.image_attention`) on the clean images and on
every (corruption, severity). The maps go into one Parquet table; the database turns them
into Jensen-Shannon divergences from the clean map
(:mod:`vqarobust.metrics.attention`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from vqarobust import store
from vqarobust.devices import lease_device
from vqarobust.inference import decode_images
from vqarobust.models import ModelRef
from vqarobust.samples import sample_questions
from vqarobust.seeding import derive_seed

log = logging.getLogger(__name__)

DEFAULT_N = 50


def attention_questions(questions: pl.DataFrame, seed: int, n: int = DEFAULT_N) -> pl.DataFrame:
    """The report's sample questions (:func:`vqarobust.samples.sample_questions`) and ``n``
    others chosen by a hash of (seed, question id), so the choice does not depend on row
    order: (question_id, image_id, question, sample), ``sample`` true for the former."""
    samples = sample_questions(questions, seed).select("question_id")
    rest = questions.join(samples, on="question_id", how="anti")
    keyed = rest.with_columns(
        pl.col("question_id")
        .map_elements(lambda q: derive_seed(seed, "attention", q), return_dtype=pl.Int64)
        .alias("_key")
    )
    picked = keyed.sort("_key").head(n).select("question_id")
    chosen = pl.concat(
        [
            samples.with_columns(pl.lit(True).alias("sample")),
            picked.with_columns(pl.lit(False).alias("sample")),
        ]
    )
    return chosen.join(
        questions.select("question_id", "image_id", "question"), on="question_id"
    ).sort("question_id")


def attention_maps(
    ref: ModelRef,
    questions_path: str | os.PathLike[str],
    subsets: Sequence[tuple[str, int, str | os.PathLike[str]]],
    out_path: str | os.PathLike[str],
    n: int = DEFAULT_N,
    seed: int = 0,
    device: str | None = None,
) -> int:
    """Write the attention maps of the model ``ref`` for the chosen questions on every
    (perturbation, severity, image folder) of ``subsets`` (the clean folder as
    ``("clean", 0, ...)``) to ``out_path`` (store.ATTENTION_SCHEMA, atomically). A model that
    exposes no attention gets an empty table and a log line saying so. Without
    ``device`` one is leased as the entry's ``device`` asks (a GPU job does not fall back
    to the CPU). Returns the number of maps."""
    model_name = ref.name
    if device is None:
        with lease_device(policy=ref.spec.get("device", "auto"), who=f"model {model_name!r}") as d:
            return attention_maps(ref, questions_path, subsets, out_path, n, seed, d)
    questions = pl.from_arrow(store.read_questions(questions_path))
    chosen = attention_questions(questions, seed, n)
    t0 = time.perf_counter()
    model = ref.load(device)
    log.info("loaded %s on %s in %.1fs", model_name, device, time.perf_counter() - t0)
    rows: list[dict[str, Any]] = []
    texts = chosen["question"].to_list()
    image_ids = chosen["image_id"].to_list()
    t = time.perf_counter()
    for perturbation, severity, folder in subsets:
        images = decode_images(store.ImageShards(folder), sorted(set(image_ids)))
        maps: list[np.ndarray] = []
        for start in range(0, len(texts), model.batch_size):
            batch = slice(start, start + model.batch_size)
            got = model.image_attention([images[i] for i in image_ids[batch]], texts[batch])
            if got is None:
                log.info("%s exposes no attention over the image: no attention maps", model_name)
                store.write_table(store.ATTENTION_SCHEMA.empty_table(), out_path)
                return 0
            maps += got
        for qid, iid, grid in zip(chosen["question_id"], image_ids, maps, strict=True):
            rows.append(
                {
                    "model": model_name,
                    "perturbation": perturbation,
                    "severity": int(severity),
                    "question_id": qid,
                    "image_id": iid,
                    "rows": grid.shape[0],
                    "cols": grid.shape[1],
                    "weights": grid.ravel().tolist(),
                }
            )
    dt = time.perf_counter() - t
    log.info(
        "%s: %d attention maps (%d questions x %d subsets) in %.1fs",
        model_name,
        len(rows),
        chosen.height,
        len(subsets),
        dt,
    )
    store.write_table(pa.Table.from_pylist(rows, schema=store.ATTENTION_SCHEMA), out_path)
    return len(rows)

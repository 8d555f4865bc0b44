"""Attention maps of one model over the clean and every corrupted image of a few questions
(the visual-robustness paper's Figure 5; docs/metrics.md, "Attention shift").

A model's run_model job (:func:`write_attention`, after its answers, with the same
weights, each subset's maps kept by content as its answers are), or with per-subset
inference a job of its own (:func:`attention_maps`), asks the adapter for
the attention of its answer position over the image
(:meth:`vqarobust.models.base.VQAModel.image_attention`) for the report's sample questions
and a seeded sample of ``n`` more, on the clean images and on every (corruption,
severity). The maps go into one Parquet table; the database turns them
into Jensen-Shannon divergences from the clean map
(:mod:`vqarobust.metrics.attention`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vqarobust import store
from vqarobust.devices import lease_device
from vqarobust.inference import JobModel, decode_images
from vqarobust.models import ModelRef
from vqarobust.models.base import VQAModel
from vqarobust.plugins import module_digest
from vqarobust.resume import ChunkStore, subset_key
from vqarobust.samples import sample_questions
from vqarobust.seeding import derive_seed

log = logging.getLogger(__name__)

DEFAULT_N = 50
# The metadata of the empty table a model of a family without attention writes, which no
# per-subset image_attention job would (vqarobust.cloud_plan leaves it out of its pilot).
NO_ATTENTION = {b"vqarobust.attention": b"none: the model's family exposes no attention"}


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
    """Load the model ``ref`` and write its attention maps (:func:`attention_table`) to
    ``out_path`` atomically: the image_attention job of per-subset inference, where no
    job holds a model's weights for all of its subsets (a per-model run_model job draws
    them itself: :func:`write_attention`). Without ``device`` one is leased as the entry's
    ``device`` asks (a GPU job does not fall back to the CPU). Returns the number of maps."""
    if device is None:
        with lease_device(policy=ref.spec.get("device", "auto"), who=f"model {ref.name!r}") as d:
            return attention_maps(ref, questions_path, subsets, out_path, n, seed, d)
    t0 = time.perf_counter()
    model = ref.load(device)
    log.info("loaded %s on %s in %.1fs", ref.name, device, time.perf_counter() - t0)
    table = attention_table(model, ref.name, questions_path, subsets, n, seed)
    store.write_table(table, out_path)
    return table.num_rows


def attention_table(
    model: VQAModel,
    name: str,
    questions_path: str | os.PathLike[str],
    subsets: Sequence[tuple[str, int, str | os.PathLike[str]]],
    n: int = DEFAULT_N,
    seed: int = 0,
) -> pa.Table:
    """The attention maps (store.ATTENTION_SCHEMA) of the loaded ``model`` (named ``name``)
    for the chosen questions (:func:`attention_questions`) on every (perturbation,
    severity, image folder) of ``subsets``, the clean folder as ``("clean", 0, ...)``. An
    adapter that exposes no attention gives the empty table and a log line saying so."""
    chosen = attention_questions(pl.from_arrow(store.read_questions(questions_path)), seed, n)
    t = time.perf_counter()
    tables = []
    for subset in subsets:
        table = _subset_maps(model, name, chosen, *subset)
        if table is None:
            return store.ATTENTION_SCHEMA.empty_table()
        tables.append(table)
    out = pa.concat_tables(tables) if tables else store.ATTENTION_SCHEMA.empty_table()
    log.info(
        "%s: %d attention maps (%d questions x %d subsets) in %.1fs",
        name,
        out.num_rows,
        chosen.height,
        len(subsets),
        time.perf_counter() - t,
    )
    return out


def _subset_maps(
    model: VQAModel,
    name: str,
    chosen: pl.DataFrame,
    perturbation: str,
    severity: int,
    folder: str | os.PathLike[str],
) -> pa.Table | None:
    """The maps of the chosen questions on one image folder; None (and a log line) when
    the adapter exposes no attention over the image."""
    texts = chosen["question"].to_list()
    image_ids = chosen["image_id"].to_list()
    images = decode_images(store.ImageShards(folder), sorted(set(image_ids)))
    maps: list[np.ndarray] = []
    while len(maps) < len(texts):
        batch = slice(len(maps), len(maps) + model.batch_size)
        try:
            got = model.image_attention([images[i] for i in image_ids[batch]], texts[batch])
        except Exception as exc:
            # As answering does: in a model's job, a failure here would cost the
            # answers it has just written too.
            if not model.halve_batch_after(exc):
                raise
            continue
        if got is None:
            log.info("%s exposes no attention over the image: no attention maps", name)
            return None
        maps += got
    rows: list[dict[str, Any]] = [
        {
            "model": name,
            "perturbation": perturbation,
            "severity": int(severity),
            "question_id": qid,
            "image_id": iid,
            "rows": grid.shape[0],
            "cols": grid.shape[1],
            "weights": grid.ravel().tolist(),
        }
        for qid, iid, grid in zip(chosen["question_id"], image_ids, maps, strict=True)
    ]
    return pa.Table.from_pylist(rows, schema=store.ATTENTION_SCHEMA)


def write_attention(
    job: JobModel | None,
    name: str,
    questions_path: str | os.PathLike[str],
    subsets: Sequence[tuple[str, int, str | os.PathLike[str]]],
    out_path: str | os.PathLike[str],
    n: int = DEFAULT_N,
    seed: int = 0,
) -> int:
    """Write the attention maps of a run_model job's model (``job``) to ``out_path``
    (atomically); ``job`` None for a model whose family exposes no attention, which gets
    the empty table. Each subset's maps are kept in ``<out_path>.chunks/`` under the key of
    what they depend on (the job's fingerprint, ``n``, ``seed``, this module's code, the
    subset's images), as answers are (:mod:`vqarobust.resume`): a job rerun for another
    reason draws only the maps it has not got, and loads no weights for them if it has them
    all. Returns the number of maps."""
    if job is None:
        log.info("%s exposes no attention over the image: no attention maps", name)
        empty = store.ATTENTION_SCHEMA.empty_table().replace_schema_metadata(NO_ATTENTION)
        store.write_table(empty, out_path)
        ChunkStore(out_path).prune([], job_key="attention")  # maps of an earlier config
        return 0
    settings = {"n": n, "seed": seed, "code": module_digest(__name__)}
    fingerprint = {**job.fingerprint, "attention": settings}
    parts = [{"subset": f"{p}/{s}", "images": job.digest(folder)} for p, s, folder in subsets]
    keys = [subset_key(fingerprint, part) for part in parts]
    chunks = ChunkStore(out_path)
    chunks.open(
        {k: {"job": fingerprint, "subset": part} for k, part in zip(keys, parts, strict=True)}
    )
    files = [chunks.chunk(key, 0) for key in keys]
    missing = [(f, subset) for f, subset in zip(files, subsets, strict=True) if not f.exists()]
    if missing:
        _draw_missing(job.load(), name, questions_path, missing, n, seed)
    tables = [pq.read_table(f).cast(store.ATTENTION_SCHEMA) for f in files]
    table = pa.concat_tables(tables) if tables else store.ATTENTION_SCHEMA.empty_table()
    store.write_table(table, out_path)
    chunks.prune(keys, job_key="attention")
    log.info(
        "%s: %d attention maps, %d of %d subsets drawn now",
        name,
        table.num_rows,
        len(missing),
        len(subsets),
    )
    return table.num_rows


def _draw_missing(
    model: VQAModel,
    name: str,
    questions_path: str | os.PathLike[str],
    missing: Sequence[tuple[Path, tuple[str, int, str | os.PathLike[str]]]],
    n: int,
    seed: int,
) -> None:
    """Draw and keep (atomically) the maps of each missing subset; an adapter without
    attention keeps an empty table for each, so that a rerun need not load it to learn so."""
    chosen = attention_questions(pl.from_arrow(store.read_questions(questions_path)), seed, n)
    t = time.perf_counter()
    for i, (path, subset) in enumerate(missing):
        table = _subset_maps(model, name, chosen, *subset)
        if table is None:
            for rest, _ in missing[i:]:
                store.write_table(store.ATTENTION_SCHEMA.empty_table(), rest)
            return
        store.write_table(table, path)
    log.info(
        "%s: attention maps of %d questions x %d subsets in %.1fs",
        name,
        chosen.height,
        len(missing),
        time.perf_counter() - t,
    )


def attention_writer(
    name: str,
    questions_path: str | os.PathLike[str],
    params: Mapping[str, Any] | None,
    folders: Sequence[str | os.PathLike[str]],
    out_path: str | os.PathLike[str],
) -> Callable[[JobModel | None], int]:
    """What a per-model run_model job calls, once it has answered, to write its attention
    output ``out_path``: with ``params`` (:meth:`vqarobust.plan.infer.InferStage.
    attention_params`; their subsets in the order of ``folders``) the maps of the job's
    model (:func:`write_attention`); without them the empty table of a model whose family
    exposes no attention (called with None: nothing is loaded)."""
    if params is None:
        return lambda job: write_attention(None, name, questions_path, [], out_path)
    pairs = params["subsets"]
    if len(pairs) != len(folders):
        raise ValueError(f"{len(pairs)} attention subsets but {len(folders)} image folders")
    subsets = [(p, int(s), folder) for (p, s), folder in zip(pairs, folders, strict=True)]

    def draw(job: JobModel | None) -> int:
        if job is None:
            raise ValueError(f"model {name!r}: its attention maps need the job's model")
        return write_attention(
            job, name, questions_path, subsets, out_path, params["n"], params["seed"]
        )

    return draw

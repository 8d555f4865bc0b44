"""Prediction files whose metadata carries per-cell costs, as inference writes them: the
costs and GPU-hours tests read the same files."""

from __future__ import annotations

import json

import polars as pl

from vqarobust import store


def cost_entry(modality, perturbation, severity, questions, **measures):
    """One costs entry as inference writes it (the metadata contract)."""
    base = {
        "wall_s": 0.0,
        "cpu_s": 0.0,
        "gpu_s": None,
        "peak_gpu_bytes": None,
        "device": "cpu",
        "requests": None,
        "retries": None,
        "prompt_tokens": None,
        "completion_tokens": None,
    }
    return {
        "modality": modality,
        "perturbation": perturbation,
        "severity": severity,
        "questions": questions,
        **base,
        **measures,
    }


def job_record(model: str) -> dict:
    """The job fingerprint part of a metadata record that the other analyses read."""
    return {
        "model": model,
        "spec": {"family": "vilt"},
        "precision": {"device": "cpu"},
        "checkpoint": {"model": {"path": f"{model}-ckpt", "sha256": "0" * 64}},
    }


def costed_predictions(
    path, model, modality, perturbation, severities, n, entries=None, load_s=None
):
    """A predictions file of ``n`` questions per severity; its metadata record carries
    ``costs`` (the entries) unless ``entries`` is None (a file written before costs)."""
    rows = [
        (q, "a", None, model, modality, perturbation, s, False, "answered", "stop")
        for s in severities
        for q in range(1, n + 1)
    ]
    frame = pl.DataFrame(rows, schema=store.PREDICTION_SCHEMA.names, orient="row")
    table = frame.with_columns(pl.col("severity").cast(pl.Int16)).to_arrow()
    record = {"inputs": job_record(model), "started": 0.0, "finished": 1.0}
    if entries is not None:
        record |= {"costs": entries, "load_s": load_s}
    meta = {store.INPUTS_KEY: json.dumps(record).encode("utf-8")}
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_table(table.replace_schema_metadata(meta), path)
    return str(path)

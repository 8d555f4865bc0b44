"""What each chunk of inference cost: wall and CPU seconds, GPU seconds and peak GPU
memory where a GPU ran it, and a served model's requests, retries and tokens.

A chunk's cost is measured when it is computed and kept in its Parquet metadata, so a
chunk reused by a later run still counts what it cost (docs/workflow.md, "costs").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from vqarobust.models.base import VQAModel

COST_KEY = b"vqarobust.cost"
SERVED_FIELDS = ("requests", "retries", "prompt_tokens", "completion_tokens")
SUMMED = ("questions", "wall_s", "cpu_s", "gpu_s", *SERVED_FIELDS)


class CostMeter:
    """Started before a chunk's requests, stopped after: the chunk's cost. ``per_thread``:
    the chunk runs on its own thread beside others (one torch thread each), so its CPU
    time is its thread's, not the process's."""

    def __init__(self, model: VQAModel, device: str, per_thread: bool = False) -> None:
        self.model, self.device = model, device
        self.cpu_clock = time.thread_time if per_thread else time.process_time
        self.cuda = device.startswith("cuda") and _cuda_available()
        if self.cuda:
            import torch

            torch.cuda.reset_peak_memory_stats(device)
        self.usage = model.usage()
        self.wall, self.cpu = time.perf_counter(), self.cpu_clock()

    def stop(self, questions: int) -> dict[str, Any]:
        wall = time.perf_counter() - self.wall
        cpu = self.cpu_clock() - self.cpu
        peak = None
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.device)
            peak = int(torch.cuda.max_memory_allocated(self.device))
        usage = self.model.usage()
        served = {k: usage[k] - self.usage.get(k, 0) if k in usage else None for k in SERVED_FIELDS}
        return {
            "questions": questions,
            "wall_s": wall,
            "cpu_s": cpu,
            # The job holds its GPU for the whole chunk: its wall time is GPU time.
            "gpu_s": wall if self.cuda else None,
            "peak_gpu_bytes": peak,
            "device": self.device,
            **served,
        }


def add_costs(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two costs as one: sums, the larger peak; None (unknown) if either is unknown."""
    if a is None or b is None:
        return None
    out = {k: None if a.get(k) is None or b.get(k) is None else a[k] + b[k] for k in SUMMED}
    peaks = [p for p in (a.get("peak_gpu_bytes"), b.get("peak_gpu_bytes")) if p is not None]
    out["peak_gpu_bytes"] = max(peaks) if peaks else None
    out["device"] = b.get("device") or a.get("device")
    return out


def chunk_cost(table_or_path: Any) -> dict[str, Any] | None:
    """The cost a chunk file (or table read from one) records; None when it records none."""
    if isinstance(table_or_path, str | Path):
        metadata = pq.read_schema(table_or_path).metadata
    else:
        metadata = table_or_path.schema.metadata
    raw = (metadata or {}).get(COST_KEY)
    return json.loads(raw) if raw else None


def total_cost(files: Iterable[str | Path]) -> dict[str, Any] | None:
    """The summed cost of chunk files; None if any records none."""
    total: dict[str, Any] | None = {k: 0 for k in SUMMED} | {"peak_gpu_bytes": None}
    for i, path in enumerate(files):
        cost = chunk_cost(path)
        total = cost if i == 0 else add_costs(total, cost)
    return total


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()

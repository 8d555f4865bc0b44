"""Finished inference kept by content: the fingerprints of what answers depend on, and the
folder of finished chunks that a rerun reuses.

A ``run_model`` job answers every severity of one perturbation. Each subset (one
severity) has its own key, the SHA-256 of everything its answers depend on: the model's
answer-relevant spec, the identity of its weights, the device type and dtype the answers
are computed in, the questions file, the chunk size, and the subset's own images, question
set and feature swaps. Finished chunks are kept under ``<output>.chunks/`` by that key, also
after the job has merged them into its output, so that

- a killed job resumes from its finished chunks, whatever else changed in the job;
- a job rerun because its list of subsets changed (a severity added, one removed)
  computes only the subsets it has no chunks of;
- a subset whose inputs changed (other weights, another dtype, new images) is computed
  again, and the log says what changed.

When a job finishes, the chunks of subsets it no longer has are removed: the folder then
holds the output's own rows, once more.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vqarobust import store
from vqarobust.digests import text_sha256, tree_sha256
from vqarobust.models.base import resolved_precision

log = logging.getLogger(__name__)

# Hex digits of a subset's key in file names (64 bits: collisions are not a concern).
KEY_LENGTH = 16


@dataclass(frozen=True)
class SubsetInputs:
    """One subset as a job names it (``modality/perturbation/severity``) and the paths its
    answers read: image shards (or a feature table), a perturbed question set, swaps."""

    name: str
    images: str
    question_set: str | None = None
    swaps: str | None = None


class Digests:
    """SHA-256 of files and folders, each read once per job (a folder shared by several
    subsets is hashed once)."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, path: str | os.PathLike[str] | None) -> str | None:
        if path is None:
            return None
        key = str(path)
        if key not in self._seen:
            self._seen[key] = tree_sha256(key)
        return self._seen[key]


def job_fingerprint(
    model_name: str,
    spec: Mapping[str, Any],
    checkpoint: Mapping[str, Any],
    code: str | None,
    questions: str | None,
    device: str,
    chunk_size: int,
) -> dict[str, Any]:
    """What every subset of a job depends on: the model's name and answer-relevant spec, its
    weights by content (``checkpoint``: the ``identity`` of
    :func:`~vqarobust.models.identity.resolve_checkpoints`, taken from the files the job
    loads), the code that computes the answers (``code``:
    :func:`~vqarobust.models.family_code_digest`), the device
    type and dtype the answers are computed in (``precision``: a GPU run with ``device:
    auto`` answers in bfloat16, a CPU run in float32), the questions file's SHA-256
    (``questions``), the chunk size, and the image backend: whether torchvision is
    installed, and which version, decides which image processor class a checkpoint that
    names the plain one (``ViltImageProcessor``) gets, and the two resample differently
    (docs/install.md, "Notes on dependencies")."""
    return {
        "model": model_name,
        "spec": dict(spec),
        "checkpoint": dict(checkpoint),
        "code": code,
        "precision": resolved_precision(spec, device),
        "questions": questions,
        "chunk_size": chunk_size,
        # A served model's images go to the server as PNG: no processor runs here.
        "image_backend": None if spec.get("family") == "openai-chat" else image_backend(),
    }


def image_backend() -> str:
    """``torchvision <version>``, or ``pil`` where torchvision is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"torchvision {version('torchvision')}"
    except PackageNotFoundError:
        return "pil"


def subset_fingerprint(subset: SubsetInputs, digest: Callable[[Any], str | None]) -> dict:
    """A subset's own inputs by content: its name and the SHA-256 of its images, question
    set and (context subsets of feature models) swaps."""
    entry = {
        "subset": subset.name,
        "images": digest(subset.images),
        "question_set": digest(subset.question_set),
    }
    if subset.swaps:
        entry["swaps"] = digest(subset.swaps)
    return entry


def subset_key(job: Mapping[str, Any], subset: Mapping[str, Any]) -> str:
    """The key of one subset's finished chunks: a digest of the job's and the subset's
    fingerprints together."""
    text = json.dumps({"job": job, "subset": subset}, sort_keys=True, default=str)
    return text_sha256(text)[:KEY_LENGTH]


def changed_inputs(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Readable names of what differs between two fingerprints (empty when none does).

    Either side is a job's fingerprint with a ``subsets`` list, or one subset's
    (``{"job": ..., "subset": ...}``, as :class:`ChunkStore` keeps it)."""
    old_job, new_job = old.get("job", old), new.get("job", new)
    changed = []
    names = {
        "questions": "the questions file",
        "precision": "the device type or dtype",
        "code": "the code of the model's family (adapter, inference.py)",
        "image_backend": "the image backend (torchvision)",
        "attention": "the attention maps' settings or code (n, seed, vqarobust.attention)",
    }
    keys = ("model", "spec", "code", "precision", "questions", "chunk_size", "image_backend")
    for key in (*keys, "attention"):
        if old_job.get(key) != new_job.get(key):
            detail = ""
            if key == "precision":
                detail = f" ({_precision(old_job.get(key))} -> {_precision(new_job.get(key))})"
            changed.append(names.get(key, f"the model {key}") + detail)
    old_ck, new_ck = old_job.get("checkpoint", {}), new_job.get("checkpoint", {})
    for key in sorted(set(old_ck) | set(new_ck)):
        before, after = old_ck.get(key) or {}, new_ck.get(key) or {}
        if before == after:
            continue
        if "replies_as" in before or "replies_as" in after:
            changed.append(f"the served model ({_served(before)} -> {_served(after)})")
        else:
            changed.append(f"the weights ({key})")
    old_subsets = {s["subset"]: s for s in old.get("subsets", [old.get("subset")]) if s}
    new_subsets = {s["subset"]: s for s in new.get("subsets", [new.get("subset")]) if s}
    if "subsets" in old and "subsets" in new and list(old_subsets) != list(new_subsets):
        changed.append("the list of subsets")
    for name, sub in new_subsets.items():
        before = old_subsets.get(name)
        if before is None:
            continue
        for part, label in (
            ("images", "images"),
            ("question_set", "question set"),
            ("swaps", "feature swaps"),
        ):
            if before.get(part) != sub.get(part):
                changed.append(f"the {label} of {name}")
    return changed


def _served(identity: Mapping[str, Any]) -> str:
    """How a served model's identity reads in a log line."""
    return (
        f"replies as {identity.get('replies_as')}, fingerprint {identity.get('system_fingerprint')}"
    )


def _precision(value: Mapping[str, Any] | None) -> str:
    if not value:
        return "not recorded"
    return f"{value.get('device')}/{value.get('dtype')}"


class ChunkStore:
    """The finished chunks of one job's output: ``<output>.chunks/`` holds, per subset key,
    ``<key>.json`` (the subset's fingerprint) and ``<key>-<first row>.parquet`` per chunk.
    """

    def __init__(self, out_path: str | os.PathLike[str]) -> None:
        self.folder = Path(f"{out_path}.chunks")

    def chunk(self, key: str, start: int) -> Path:
        """The file of the chunk of subset ``key`` that begins at row ``start``."""
        return self.folder / f"{key}-{start:07d}.parquet"

    @staticmethod
    def partial(chunk: Path) -> Path:
        """Where a chunk some of whose requests failed is kept until they are answered."""
        return chunk.with_suffix(".partial.parquet")

    def _recorded(self) -> dict[str, dict[str, Any]]:
        """Key -> fingerprint of every subset with a readable record in the folder."""
        out = {}
        for path in sorted(self.folder.glob("*.json")):
            if path.stem.startswith("parameters-"):
                continue
            try:
                out[path.stem] = json.loads(path.read_text())
            except (json.JSONDecodeError, OSError):
                out[path.stem] = {}
        return out

    def open(self, fingerprints: Mapping[str, Mapping[str, Any]]) -> None:
        """Make the folder ready for subsets ``key -> {"job", "subset"}``: record each one,
        and discard (saying why) the chunks of a subset of the same name computed from other
        inputs. Chunks of subsets this job does not name are kept (a job may be resumed
        with its subsets changed); :meth:`prune` removes them once the output is written."""
        self.folder.mkdir(parents=True, exist_ok=True)
        by_name = {fp["subset"]["subset"]: key for key, fp in fingerprints.items()}
        for key, old in self._recorded().items():
            name = (old.get("subset") or {}).get("subset")
            current = by_name.get(name) if name else None
            if key in fingerprints or (name and current is None):
                continue
            files = list(self.folder.glob(f"{key}-*.parquet"))
            why = (
                ", ".join(changed_inputs(old, fingerprints[current]))
                if current
                else "no readable record"
            ) or "their inputs differ"
            log.warning(
                "discarding %d finished chunks of %s in %s: changed since they were computed: %s",
                len(files),
                name or key,
                self.folder,
                why,
            )
            self._remove(key)
        for key, fp in fingerprints.items():
            record = self.folder / f"{key}.json"
            if not record.exists():
                with store.atomic_path(record) as tmp:
                    tmp.write_text(json.dumps(fp, sort_keys=True, default=str))

    def parameters(self, job_key: str) -> Path:
        """Where the model's parameter count is kept, for a job that loads no model."""
        return self.folder / f"parameters-{job_key}.json"

    def merge(self, files: Sequence[Path]) -> pa.Table:
        """The chunks as one predictions table, in the order given."""
        # Each cast on its own: a chunk kept from before severities were int16 is int8.
        tables = [pq.read_table(f).cast(store.PREDICTION_SCHEMA) for f in files]
        if not tables:
            return store.PREDICTION_SCHEMA.empty_table()
        return pa.concat_tables(tables)

    def prune(self, keep: Sequence[str], job_key: str) -> None:
        """Remove the chunks and records of every subset not in ``keep``, and every other
        job's parameter count: what stays is the written output's rows."""
        for key in self._recorded():
            if key not in keep:
                self._remove(key)
        for path in self.folder.glob("parameters-*.json"):
            if path != self.parameters(job_key):
                path.unlink()
        for path in self.folder.glob("*.parquet"):
            if path.name.split("-", 1)[0] not in keep:
                path.unlink()  # chunks without a record (their record was removed first)

    def _remove(self, key: str) -> None:
        for path in self.folder.glob(f"{key}-*.parquet"):
            path.unlink()
        (self.folder / f"{key}.json").unlink(missing_ok=True)

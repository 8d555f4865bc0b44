"""What every dataset adapter shares: choose the images, check them, write the outputs.

An adapter turns its source format into a :class:`Dataset`: a questions table (the
columns of ``store.QUESTION_SCHEMA``), an :class:`~vqarobust.datasets.sources.ImageSource`
and a description; :func:`write_prepared` does the rest, the same way for every dataset:

* the images are a seeded sample of ``n_images`` (all when None) of the images that have
  questions, or exactly the ids of a manifest file; every question of a chosen image is
  kept;
* each chosen image is read as stored (never re-encoded) and fully decoded once, so a
  missing or broken file is found here rather than in the middle of inference;
* bad images either fail the job (policy ``fail``, naming the first ids and how to skip
  them) or are left out with their questions, counted and named (policy ``skip``);
* a source read without images (GQA for feature models only) writes no shards: its
  images are kept unchecked, as nothing reads their pixels;
* outputs: the questions table, the image shards, a manifest of the kept image ids (to
  reproduce the subset elsewhere) and ``dataset.json`` with counts and skipped images.
  Each is written atomically.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from vqarobust import store
from vqarobust.datasets.sources import ImageSource

log = logging.getLogger(__name__)

BAD_IMAGE_POLICIES = ("fail", "skip")
# How many skipped images dataset.json (and so the report) names one by one.
LISTED_BAD_IMAGES = 100


@dataclass(frozen=True)
class Dataset:
    """What an adapter reads: questions, where their images are, and a description
    (adapter name, source files) for the manifest header and ``dataset.json``."""

    questions: pl.DataFrame
    images: ImageSource
    describe: Mapping[str, Any]


class BadImagesError(ValueError):
    """Chosen images are missing or do not decode, and the policy is ``fail``."""


def select_images(image_ids: Any, n_images: int | None, seed: int) -> list[int]:
    """A seeded subset of ``n_images`` distinct image ids (all when None), sorted."""
    unique = np.unique(np.asarray(list(image_ids), dtype=np.int64))
    if n_images is None or n_images >= len(unique):
        return unique.tolist()
    if n_images <= 0:
        raise ValueError(f"n_images must be positive, got {n_images}")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(unique, size=n_images, replace=False)).tolist()


def read_manifest(path: str | os.PathLike[str]) -> list[int]:
    """Image ids of a manifest file: one integer per line; blank lines and ``#`` comments skip."""
    ids: list[int] = []
    seen: set[int] = set()
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            image_id = int(text)
        except ValueError:
            raise ValueError(f"{path}, line {number}: {text!r} is not an image id") from None
        if image_id in seen:
            raise ValueError(f"{path}, line {number}: image {image_id} is listed twice")
        seen.add(image_id)
        ids.append(image_id)
    if not ids:
        raise ValueError(f"{path}: the manifest lists no image ids")
    return ids


def write_manifest(path: str | os.PathLike[str], ids: list[int], header: Mapping[str, Any]) -> None:
    """Write a manifest (``# key: value`` header lines, then one id per line) atomically."""
    lines = [f"# {k}: {v}" for k, v in header.items()] + [str(i) for i in sorted(ids)]
    with store.atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")


def choose_images(
    available: list[int], n_images: int | None, seed: int, manifest: str | None
) -> list[int]:
    """The image ids to prepare: a manifest's, or a seeded sample of ``available``."""
    if manifest is None:
        return select_images(available, n_images, seed)
    ids = read_manifest(manifest)
    known = set(available)
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(
            f"manifest {manifest}: {len(unknown)} image ids have no questions in the "
            f"dataset, e.g. {unknown[:10]}"
        )
    return sorted(ids)


def check_questions(questions: pl.DataFrame, source: str) -> pl.DataFrame:
    """The table in QUESTION_SCHEMA's column order; duplicate question ids raise."""
    missing = [c for c in store.QUESTION_SCHEMA.names if c not in questions.columns]
    if missing:
        raise ValueError(f"{source}: questions lack columns {missing}")
    dup = questions.filter(pl.col("question_id").is_duplicated())["question_id"].unique()
    if dup.len():
        raise ValueError(
            f"{source}: {dup.len()} question ids occur more than once, e.g. "
            f"{sorted(dup.to_list())[:10]}"
        )
    return questions.select(store.QUESTION_SCHEMA.names)


@dataclass(frozen=True)
class PreparedOutputs:
    """Where a prepared split goes: its questions (QUESTION_SCHEMA), image shards (of
    ``shard_bytes``, a size that changes files and never an image), manifest and
    ``dataset.json``."""

    questions: str | os.PathLike[str]
    images: str | os.PathLike[str]
    manifest: str | os.PathLike[str]
    info: str | os.PathLike[str]
    shard_bytes: int = store.DEFAULT_SHARD_BYTES


def write_prepared(
    questions: pl.DataFrame,
    images: ImageSource,
    out: PreparedOutputs,
    *,
    n_images: int | None,
    seed: int,
    manifest: str | None = None,
    on_bad_image: str = "fail",
    describe: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Choose, check and write a dataset (see the module docstring); returns counts.

    ``describe`` (adapter name, source files) goes into ``dataset.json`` and the
    manifest's header.
    """
    if on_bad_image not in BAD_IMAGE_POLICIES:
        raise ValueError(f"on_bad_image must be one of {BAD_IMAGE_POLICIES}, not {on_bad_image!r}")
    describe = dict(describe or {})
    source = str(describe.get("adapter", "dataset"))
    questions = check_questions(questions, source)
    chosen = choose_images(questions["image_id"].unique().to_list(), n_images, seed, manifest)
    bad: list[dict[str, Any]] = []

    def rows() -> Iterator[dict]:
        if not images.has_files:  # read without images: empty shards, every image kept
            return
        for image_id in chosen:
            try:
                data = images.read(image_id)
            except FileNotFoundError:
                bad.append({"image_id": image_id, "reason": "missing"})
                continue
            try:
                fmt, width, height = store.image_info(data, verify=True)
            except Exception as exc:
                # PIL names the stream by its memory address: left out, so that the
                # reason (a table row, a log line) is the same in every run.
                message = re.sub(r" at 0x[0-9a-fA-F]+", "", str(exc))
                reason = f"does not decode ({type(exc).__name__}: {message})"
                bad.append({"image_id": image_id, "reason": reason})
                continue
            yield {
                "image_id": image_id,
                "bytes": data,
                "format": fmt,
                "width": width,
                "height": height,
            }

    # The shards land in a temporary folder that is renamed only if the policy allows.
    with store.atomic_path(out.images) as tmp_images:
        n_written = store.write_image_shards(rows(), tmp_images, out.shard_bytes)
        if bad:
            first = ", ".join(f"{b['image_id']} ({b['reason']})" for b in bad[:5])
            message = f"{len(bad)} of {len(chosen)} chosen images are missing or broken: {first}"
            if on_bad_image == "fail":
                raise BadImagesError(
                    f"{source}: {message}. Set dataset.on_bad_image: skip to leave them "
                    "(and their questions) out; they are then counted in the report."
                )
            log.warning(
                "%s: %s; skipped with their questions (on_bad_image: skip)", source, message
            )
        if n_written == 0 and images.has_files:
            raise BadImagesError(f"{source}: none of the {len(chosen)} chosen images is usable")
    bad_ids = {b["image_id"] for b in bad}
    kept_ids = [i for i in chosen if i not in bad_ids]
    kept = questions.filter(pl.col("image_id").is_in(kept_ids)).sort("image_id", "question_id")
    n_dropped = questions.filter(pl.col("image_id").is_in(list(bad_ids))).height
    store.write_table(kept.to_arrow().cast(store.QUESTION_SCHEMA), out.questions)
    header = {**describe, "seed": seed, "n_images": len(kept_ids)}
    write_manifest(
        out.manifest, kept_ids, {"vqarobust manifest": "image ids, one per line", **header}
    )
    info = {
        **describe,
        "seed": seed,
        "n_images_requested": n_images if manifest is None else len(chosen),
        "manifest": manifest,
        "n_images": len(kept_ids),
        "n_questions": kept.height,
        "has_images": images.has_files,
        "on_bad_image": on_bad_image,
        "n_skipped_images": len(bad),
        "n_skipped_questions": n_dropped,
        "skipped_images": bad[:LISTED_BAD_IMAGES],
    }
    with store.atomic_path(out.info) as tmp:
        tmp.write_text(json.dumps(info, indent=1, default=str), encoding="utf-8")
    log.info(
        "%s: %d images, %d questions (%d images skipped)",
        source,
        len(kept_ids),
        kept.height,
        len(bad),
    )
    return {"images": len(kept_ids), "questions": kept.height, "skipped_images": len(bad)}

"""Materialize a corrupted image subset: corrupt each clean image, write the shards; and
score a subset's images against the clean ones with LPIPS."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from vqarobust import store
from vqarobust.corruptions import (
    box_shortfall,
    corrupt_item,
    max_severity,
    needs,
    resizes,
    to_rgb,
)
from vqarobust.corruptions import options as corruption_options
from vqarobust.corruptions.boxes import NEEDS as BOXES
from vqarobust.corruptions.digital import jpeg_compression_bytes
from vqarobust.corruptions.quality import DEFAULT_WINDOW, at_size, ssim_psnr
from vqarobust.corruptions.registry import STYLE_WEIGHTS
from vqarobust.corruptions.stylize import Stylizer
from vqarobust.progress import Progress

log = logging.getLogger(__name__)


def _subset_context(
    corruption: str, options: Mapping[str, Any] | None, threads: int | None
) -> tuple[dict[str, Any], dict[int, np.ndarray] | None]:
    """The keyword arguments every image of a subset gets (:func:`corrupt_subset`'s
    ``options`` checked and loaded) and, for a box-aware corruption, the relevant boxes
    per image id (None for the others)."""
    context: dict[str, Any] = dict(options or {})
    if needs(corruption) == STYLE_WEIGHTS:
        if not context:
            raise ValueError(f"{corruption} needs {needs(corruption)}")
        import torch

        if threads is not None:
            torch.set_num_threads(int(threads))
        return {"stylizer": Stylizer(**context)}, None
    if needs(corruption) == BOXES:
        if set(context) != {"boxes"}:
            raise ValueError(f"{corruption} needs boxes=, the object boxes table, and only it")
        from vqarobust.datasets.object_boxes import read_boxes, relevant_boxes

        return {}, relevant_boxes(read_boxes(context["boxes"]))
    if extra := set(context) - set(corruption_options(corruption)):
        raise ValueError(f"{corruption} takes no option {', '.join(sorted(extra))}")
    return context, None


# The SSIM window scores the stored images: it belongs to none of the other settings'
# objects (storage, the corruption's options), hence a ninth argument.
def corrupt_subset(  # noqa: PLR0913
    clean_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    corruption: str,
    severity: int,
    global_seed: int = 0,
    storage: store.ImageStorage = store.DEFAULT_STORAGE,
    threads: int | None = None,
    options: Mapping[str, Any] | None = None,
    ssim_window: str = DEFAULT_WINDOW,
) -> int:
    """Write every clean image corrupted with (corruption, severity) as shards in ``out_dir``.

    Images are stored as ``storage`` says (png, or jpeg at its quality; shards of its
    size); the jpeg_compression corruption stores its own JPEG bytes. The shard's ``format`` column
    records the encoding of each image.

    Each image also gets its SSIM (with ``ssim_window``) and PSNR against the clean
    image, on the image as stored (columns ``ssim`` and ``psnr``;
    :mod:`vqarobust.corruptions.quality`); a
    resizing corruption's smaller image is scaled back to the clean size for them
    (:func:`~vqarobust.corruptions.quality.at_size`), and ``width`` and ``height`` are
    the stored image's.

    Each image's seed derives from (global seed, image id, corruption, severity), so the
    output does not depend on shard layout or job order. Returns the number of images.

    ``threads`` caps OpenCV's (process-wide) thread pool, so a job stays within the cores
    the scheduler gave it; None leaves OpenCV's default (all cores). ``options`` are
    the settings the corruption takes: for stylize the ``weights`` and ``styles`` folders
    (and ``style_size``), its network loaded once for the whole subset; for the others
    the config settings :func:`vqarobust.corruptions.options` names (another is an error);
    for the box-aware ones (``object_crop``, ``occlude_context``) ``boxes``, the path of
    the dataset's object boxes table (:mod:`vqarobust.datasets.object_boxes`): each image
    gets its relevant boxes, and the images that get less than the severity (no box data,
    no relevant object, a widened crop, no room for a patch) are counted in the log.
    """
    if threads is not None:
        import cv2

        cv2.setNumThreads(int(threads))
    context, boxes = _subset_context(corruption, options, threads)
    if not 1 <= severity <= max_severity(corruption):
        raise ValueError(
            f"{corruption} has severities 1..{max_severity(corruption)}, not {severity}"
        )

    shortfalls: dict[str, list[int]] = {}  # reason -> image ids (box-aware corruptions)
    scoring = [0.0]  # seconds spent on quality scores, logged: their cost is a goal
    started = time.perf_counter()

    # The count from the footers: no second read of the id columns before the images.
    progress = Progress(f"{corruption}/{severity}", store.count_images(clean_dir), "images", log)

    def rows() -> Iterator[dict]:
        for row in store.iter_images(clean_dir):
            try:
                image = store.decode_image(row["bytes"])
            except Exception as exc:
                raise ValueError(f"image {row['image_id']} in {clean_dir} does not decode") from exc
            clean = to_rgb(image)
            if boxes is not None and corruption != "jpeg_compression":
                b = context["boxes"] = boxes.get(int(row["image_id"]))
                reason = box_shortfall(corruption, *clean.shape[:2], severity, b)
                if reason:
                    shortfalls.setdefault(reason, []).append(int(row["image_id"]))
            data, fmt, seen = _stored(
                image, clean, corruption, severity, global_seed, row["image_id"], storage, context
            )
            t = time.perf_counter()
            ssim, psnr = ssim_psnr(clean, at_size(seen, *clean.shape[:2]), ssim_window)
            scoring[0] += time.perf_counter() - t
            progress.advance()
            yield {
                "image_id": row["image_id"],
                "bytes": data,
                "format": fmt,
                "width": seen.shape[1],
                "height": seen.shape[0],
                "ssim": ssim,
                "psnr": psnr,
            }

    n = store.write_image_shards(rows(), out_dir, storage.shard_bytes, store.CORRUPTED_IMAGE_SCHEMA)
    for reason, ids in sorted(shortfalls.items()):
        log.warning(
            "%s severity %d: %d of %d images get less than the severity (%s), e.g. %s",
            corruption,
            severity,
            len(ids),
            n,
            reason,
            ids[:5],
        )
    total = time.perf_counter() - started
    log.info(
        "%s severity %d: %d images -> %s in %.2f s, %.2f s of it quality scores",
        corruption,
        severity,
        n,
        out_dir,
        total,
        scoring[0],
    )
    return n


def _stored(
    image: Any,
    clean: np.ndarray,
    corruption: str,
    severity: int,
    global_seed: int,
    image_id: int,
    storage: store.ImageStorage,
    context: Mapping[str, Any],
) -> tuple[bytes, str, np.ndarray]:
    """One corrupted image as stored: its bytes, their format, and the array a model will
    read from them."""
    if corruption == "jpeg_compression":
        # Store the corruption's own JPEG file; re-encoding would compress twice.
        data = jpeg_compression_bytes(clean, severity)
        return data, "jpeg", store.decode_image(data)
    out = corrupt_item(image, corruption, severity, global_seed, image_id, **context)
    data, fmt = storage.encode(out), storage.image_format
    # PNG is lossless: the array is what a model will read; JPEG is not.
    return data, fmt, out if fmt == "png" else store.decode_image(data)


LPIPS_SCHEMA = pa.schema(
    [
        ("perturbation", pa.string()),
        ("severity", store.SEVERITY),
        ("image_id", pa.int64()),
        ("lpips", pa.float64()),
    ]
)
LPIPS_BATCH = 32  # image pairs per forward pass


def score_lpips(
    clean_dir: str | os.PathLike[str],
    corrupted_dir: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    perturbation: str,
    severity: int,
    backbone: str | os.PathLike[str],
    linear: str | os.PathLike[str],
    threads: int | None = None,
) -> int:
    """LPIPS (:mod:`vqarobust.corruptions.lpips`) of every image of a corrupted subset
    against its clean image, on the images as stored: one row per image (LPIPS_SCHEMA).
    Pairs go through the network in batches of one image size; a resizing corruption's
    images are scaled back to the clean size first (``at_size``). Returns the rows."""
    import torch

    from vqarobust.corruptions.lpips import load_lpips

    if threads is not None:
        torch.set_num_threads(int(threads))
    metric = load_lpips(backbone, linear)
    clean = store.ImageShards(clean_dir)
    started = time.perf_counter()
    ids: list[int] = []
    scores: list[float] = []
    pending: dict[tuple[int, ...], list[tuple[int, np.ndarray, np.ndarray]]] = {}

    def flush(shape: tuple[int, ...]) -> None:
        batch = pending.pop(shape)
        values = metric.distance(np.stack([b[1] for b in batch]), np.stack([b[2] for b in batch]))
        ids.extend(b[0] for b in batch)
        scores.extend(float(v) for v in values)

    def pair(rows: list[dict]) -> None:
        # The clean images of a batch of corrupted ones in one read of their row groups.
        originals = clean.read([int(r["image_id"]) for r in rows])
        for row in rows:
            image_id = int(row["image_id"])
            seen = to_rgb(store.decode_image(row["bytes"]))
            original = to_rgb(store.decode_image(originals[image_id]))
            if resizes(perturbation):
                seen = at_size(seen, *original.shape[:2])
            if original.shape != seen.shape:
                sizes = f"{seen.shape[:2]}, its clean image {original.shape[:2]}"
                raise ValueError(f"image {image_id}: {corrupted_dir} holds size {sizes}")
            pending.setdefault(seen.shape, []).append((image_id, original, seen))
            if len(pending[seen.shape]) == LPIPS_BATCH:
                flush(seen.shape)

    buffered: list[dict] = []
    for row in store.iter_images(corrupted_dir):
        buffered.append(row)
        if len(buffered) == LPIPS_BATCH:
            pair(buffered)
            buffered = []
    if buffered:
        pair(buffered)
    for shape in list(pending):
        flush(shape)
    order = np.argsort(ids, kind="stable")
    table = pa.table(
        {
            "perturbation": pa.array([perturbation] * len(ids), pa.string()),
            "severity": pa.array([severity] * len(ids), store.SEVERITY),
            "image_id": pa.array(np.asarray(ids, np.int64)[order]),
            "lpips": pa.array(np.asarray(scores, np.float64)[order]),
        },
        schema=LPIPS_SCHEMA,
    )
    store.write_table(table, out_path)
    log.info(
        "%s severity %d: LPIPS of %d images in %.2f s -> %s",
        perturbation,
        severity,
        len(ids),
        time.perf_counter() - started,
        out_path,
    )
    return len(ids)

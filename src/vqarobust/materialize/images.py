"""Materialize a corrupted image subset: corrupt each clean image, write the shards."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from vqarobust import store
from vqarobust.corruptions import corrupt_item, max_severity, needs, to_rgb
from vqarobust.corruptions.digital import jpeg_compression_bytes
from vqarobust.corruptions.quality import ssim_psnr
from vqarobust.corruptions.stylize import Stylizer
from vqarobust.progress import Progress

log = logging.getLogger(__name__)


def corrupt_subset(
    clean_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    corruption: str,
    severity: int,
    global_seed: int = 0,
    storage: store.ImageStorage = store.DEFAULT_STORAGE,
    threads: int | None = None,
    stylize: Mapping[str, Any] | None = None,
) -> int:
    """Write every clean image corrupted with (corruption, severity) as shards in ``out_dir``.

    Images are stored as ``storage`` says (png, or jpeg at its quality; shards of its
    size); the jpeg_compression corruption stores its own JPEG bytes. The shard's ``format`` column
    records the encoding of each image.

    Each image also gets its SSIM and PSNR against the clean image, on the image as
    stored (columns ``ssim`` and ``psnr``; :mod:`vqarobust.corruptions.quality`).

    Each image's seed derives from (global seed, image id, corruption, severity), so the
    output does not depend on shard layout or job order. Returns the number of images.

    ``threads`` caps OpenCV's (process-wide) thread pool, so a job stays within the cores
    the scheduler gave it; None leaves OpenCV's default (all cores). ``stylize`` holds
    the ``weights`` and ``styles`` folders (and ``style_size``) the stylize corruption
    needs; the network is loaded once for the whole subset.
    """
    if threads is not None:
        import cv2

        cv2.setNumThreads(int(threads))
    context: dict[str, Any] = {}
    if corruption == "stylize":
        if not stylize:
            raise ValueError(f"{corruption} needs {needs(corruption)}")
        import torch

        if threads is not None:
            torch.set_num_threads(int(threads))
        context["stylizer"] = Stylizer(**stylize)
    if not 1 <= severity <= max_severity(corruption):
        raise ValueError(
            f"{corruption} has severities 1..{max_severity(corruption)}, not {severity}"
        )

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
            if corruption == "jpeg_compression":
                # Store the corruption's own JPEG file; re-encoding would compress twice.
                data, fmt = jpeg_compression_bytes(clean, severity), "jpeg"
                seen = store.decode_image(data)
            else:
                out = corrupt_item(image, corruption, severity, global_seed, row["image_id"],
                                   **context)  # fmt: skip
                data, fmt = storage.encode(out), storage.image_format
                # PNG is lossless: the array is what a model will read; JPEG is not.
                seen = out if fmt == "png" else store.decode_image(data)
            t = time.perf_counter()
            ssim, psnr = ssim_psnr(clean, seen)
            scoring[0] += time.perf_counter() - t
            progress.advance()
            yield {
                "image_id": row["image_id"],
                "bytes": data,
                "format": fmt,
                "width": image.shape[1],
                "height": image.shape[0],
                "ssim": ssim,
                "psnr": psnr,
            }

    n = store.write_image_shards(rows(), out_dir, storage.shard_bytes,
                                 store.CORRUPTED_IMAGE_SCHEMA)  # fmt: skip
    total = time.perf_counter() - started
    log.info("%s severity %d: %d images -> %s in %.2f s, %.2f s of it quality scores",
             corruption, severity, n, out_dir, total, scoring[0])  # fmt: skip
    return n

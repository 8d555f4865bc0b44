"""Image features kept across a job's chunks, by the image's content.

A model's job asks about the clean images once per question perturbation (66 subsets in
the default study): the image side of an adapter that encodes each image on its own
(``keeps_features`` of :class:`vqarobust.models.base.SharesImageFeatures`) depends on
the image alone, so what one chunk computed serves every later chunk that shows the
same pixels. Features of an image encoded a second time are kept, up to a byte budget,
and only on the CPU (a GPU job keeps its memory for its batches).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Any

from PIL import Image

log = logging.getLogger(__name__)

# What a job keeps at most: the clean images' features of a study like the default (200
# images) many times over; a large model's features of a few hundred images.
BUDGET_BYTES = 256 * 2**20
# Images remembered as encoded once (about 150 bytes each with the set's overhead): the
# full benchmark's 70 corrupted subsets of 3,000 images fit.
MAX_SEEN = 1_000_000


def content_key(image: Image.Image) -> bytes:
    """A digest of the image's mode, size and pixels: equal keys, equal images."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{image.mode} {image.size}".encode())
    digest.update(image.tobytes())
    return digest.digest()


def nbytes(features: Any) -> int:
    """Bytes held by a tensor, or by the tensors of a tuple, list or dict of them: a
    tensor's whole storage (a row of a batch keeps the batch's storage alive)."""
    if isinstance(features, dict):
        return sum(nbytes(v) for v in features.values())
    if isinstance(features, list | tuple):
        return sum(nbytes(v) for v in features)
    storage = getattr(features, "untyped_storage", None)
    if storage is not None:
        return int(storage().nbytes())
    size = getattr(features, "nbytes", None)
    return int(size) if size is not None else 0


class FeatureMemory:
    """Features by (encoder, image content), safe to share between threads. Features are
    kept the second time they are encoded: an image a job asks about in one subset only
    (a corrupted one) is never kept, the clean images of the question subsets are. What
    is kept stays; past ``budget`` bytes nothing more is (a least-recently-used memory
    smaller than the images a subset asks about would drop each before its next use)."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self.used = 0
        self._kept: dict[tuple[Any, bytes], Any] = {}
        self._seen: set[tuple[Any, bytes]] = set()
        self._full = False
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, bytes]) -> Any | None:
        with self._lock:
            return self._kept.get(key)

    def offer(self, key: tuple[Any, bytes], features: Any) -> None:
        """Keep ``features`` if they were encoded before and fit in the budget."""
        size = nbytes(features)
        with self._lock:
            if key not in self._seen:
                if len(self._seen) < MAX_SEEN:
                    self._seen.add(key)
                return
            if key in self._kept:
                return
            if self.used + size <= self.budget:
                self._kept[key] = features
                self.used += size
            elif not self._full:
                self._full = True
                log.info(
                    "image features kept: %d images, %.0f MiB: no more are kept",
                    len(self._kept),
                    self.used / 2**20,
                )

    def __len__(self) -> int:
        return len(self._kept)

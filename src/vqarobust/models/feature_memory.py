"""Image features kept across a job's chunks, by the image's content.

A model's job asks about the clean images once per question perturbation (66 subsets in
the default study): the image side of a model that shares image features
(:class:`vqarobust.models.base.SharesImageFeatures`) depends on the image alone, so
what one chunk computed serves every later chunk that shows the same pixels. Features
are kept up to a byte budget, least recently used first out, and only on the CPU (a GPU
job keeps its memory for its batches).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from PIL import Image

# What a job keeps at most: the clean images' features of a study like the default (200
# images, ViLT's patch embeddings) many times over; a large model's features of a few.
BUDGET_BYTES = 256 * 2**20


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
    """Features by (encoder, image content), least recently used dropped past
    ``budget`` bytes; safe to share between threads."""

    def __init__(self, budget: int = BUDGET_BYTES) -> None:
        self.budget = budget
        self.used = 0
        self._kept: OrderedDict[tuple[Any, bytes], tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, bytes]) -> Any | None:
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._kept.move_to_end(key)
            return found[0]

    def put(self, key: tuple[Any, bytes], features: Any) -> None:
        size = nbytes(features)
        if size > self.budget:
            return
        with self._lock:
            if key in self._kept:
                return
            self._kept[key] = (features, size)
            self.used += size
            while self.used > self.budget:
                _, (_, dropped) = self._kept.popitem(last=False)
                self.used -= dropped

    def __len__(self) -> int:
        return len(self._kept)

"""Per-item seeds: a seed is a pure function of the global seed and the item's identity.

Outputs therefore never depend on job order, shard layout or worker count.
"""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(global_seed: int, *parts: object) -> int:
    """A 63-bit seed from the global seed and any identifying parts (id, name, severity)."""
    text = "\x1f".join([str(int(global_seed)), *(str(p) for p in parts)])
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def item_rng(global_seed: int, *parts: object) -> np.random.Generator:
    """A numpy Generator seeded for one item."""
    return np.random.default_rng(derive_seed(global_seed, *parts))

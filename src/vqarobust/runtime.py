"""The one channel for settings that change how a job runs, never what it writes.

Snakemake reruns a job when one of its ``params`` changes, comparing their ``repr`` for
built-in types; a param of any other type is left out of that comparison
(``snakemake.persistence``: "unrepresentable" params). :class:`Runtime` is such a type:
what travels in it (a model's batch size and serving options, the shard size of image
folders, a rewriter's batch size, the config that provenance hashes) reaches the job's
script without ever rerunning it. Only keys that are proven not to change an output
belong here: docs/workflow.md's invalidation matrix lists them as "reruns nothing", each
with the test behind it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MB = 1024 * 1024


@dataclass(frozen=True)
class Runtime:
    """Runtime settings of one job (a read-only mapping)."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The setting ``key``, or ``default``."""
        return self.values.get(key, default)


def shard_bytes(storage: Mapping[str, Any]) -> Runtime:
    """``storage.shard_mb`` in bytes: how images are cut into Parquet shards (the images
    and their order are the same for any size)."""
    return Runtime({"shard_bytes": int(storage["shard_mb"] * MB)})

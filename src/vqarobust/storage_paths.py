"""The workflow's own path of a file that a job reads from object storage.

With ``--default-storage-provider`` (docs/cloud.md) a job reads and writes local copies
under Snakemake's local storage folder, e.g. ``.snakemake/storage/s3/<bucket>/<prefix>/
resources/models/easy-vqa/vilt-tiny`` for ``resources/models/easy-vqa/vilt-tiny``. What a
job records about its inputs (a checkpoint's path in the predictions' metadata, then the
model cards) names the workflow path, so that a run on a bucket writes the same tables as a
local run. The workflow (rules/common.smk) puts the local copies' folder in ``ENV`` for its
jobs; without it (a local run) paths are left as they are.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

ENV = "VQAROBUST_STORAGE_COPIES"


def local_copies(local_prefix: str | os.PathLike[str], provider: str, prefix: str) -> str:
    """The folder under which Snakemake keeps the local copies of ``prefix``'s files:
    ``<local_prefix>/<provider>/<prefix without its scheme>`` (``s3://b/p`` -> ``b/p``)."""
    bare = prefix.split("://", 1)[-1].strip("/")
    return str(PurePosixPath(os.fspath(local_prefix), provider, bare))


def workflow_path(path: str, copies: str | None = None) -> str:
    """``path`` without the local copies' folder (``copies``, by default ``ENV``'s value),
    or ``path`` itself where it is not one of those copies."""
    folder = os.environ.get(ENV) if copies is None else copies
    if not folder:
        return path
    posix = PurePosixPath(path)
    if posix.is_relative_to(folder):
        return str(posix.relative_to(folder))
    return path

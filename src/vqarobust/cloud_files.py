"""Files a config names (``user_path`` in vqarobust.plan), on an executor whose jobs share
no filesystem with the machine that starts the run (Kubernetes, AWS Batch, Google Batch).

Such a job receives, of that machine, only what Snakemake deploys as the workflow's sources:
the working directory's git-tracked files up to 10 MB each (``snakemake.dag.get_sources``).
The workflow refuses, before any job, a file the config names that would not travel so,
unless ``storage.named_files: on_nodes`` says the nodes hold it at the same path
(docs/cloud.md, "Limits on a cloud executor").
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from vqarobust.config import ConfigError

# The largest source file Snakemake deploys (snakemake.dag.get_sources).
SOURCE_FILE_LIMIT = 10_000_000


def tracked_files(workdir: str | os.PathLike[str] = ".") -> frozenset[str]:
    """The files git tracks under ``workdir``, relative to it, as Snakemake lists the
    sources it deploys (``git ls-files --recurse-submodules``); none outside a repository."""
    proc = subprocess.run(
        ["git", "ls-files", "--recurse-submodules", "."],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return frozenset()
    return frozenset(os.path.normpath(f) for f in proc.stdout.splitlines() if f)


def not_deployed(
    path: str, tracked: Collection[str], workdir: str | os.PathLike[str] = "."
) -> str | None:
    """Why the file or folder ``path`` that a config names would not reach a job that
    shares no filesystem with this machine, or None when it would (a git-tracked file of
    the working directory, each file of a folder too, none over
    :data:`SOURCE_FILE_LIMIT`). A path that is not here is left to the job's own check."""
    rel = os.path.normpath(path)
    if os.path.isabs(rel) or rel == ".." or rel.startswith(".." + os.sep):
        return "it lies outside the working directory"
    full = Path(workdir) / rel
    if full.is_file():
        files = [rel]
    elif full.is_dir():
        files = sorted(
            os.path.normpath(os.path.join(rel, os.path.relpath(os.path.join(d, f), full)))
            for d, _, names in os.walk(full)
            for f in names
        )
    else:
        return None
    untracked = [f for f in files if f not in tracked]
    if untracked:
        n = len(untracked) - 1
        more = f" and {n} more file{'s' * (n > 1)}" if n else ""
        return f"git does not track {untracked[0]}{more}"
    large = [f for f in files if (Path(workdir) / f).stat().st_size > SOURCE_FILE_LIMIT]
    if large:
        return f"{large[0]} is over {SOURCE_FILE_LIMIT // 1_000_000} MB"
    return None


def node_user_path(
    local: Callable[[str], Any],
    shares_files: Callable[[], bool],
    workdir: str | os.PathLike[str] = ".",
) -> Callable[[str], Any]:
    """The plan's ``user_path``: the path as ``local`` marks it, where the jobs share this
    machine's files (``shares_files()``, asked at each call: Snakemake settles the
    executor's filesystem only after the workflow is read) or where it travels with the
    sources; else a ConfigError that says why no job would find it and what to do."""
    tracked = functools.cache(lambda: tracked_files(workdir))  # git once, when first needed

    def user_path(path: str) -> Any:
        if shares_files():
            return local(path)
        why = not_deployed(str(path), tracked(), workdir)
        if why is not None:
            raise ConfigError(
                f"config error: the config names {path}, which no job of this executor would "
                f"find: its jobs share no filesystem with this machine and receive only the "
                f"working directory's git-tracked files up to "
                f"{SOURCE_FILE_LIMIT // 1_000_000} MB, and {why}. Track it in git, or put it "
                "at the same path on the nodes (the container image or a mounted volume) and "
                "set storage.named_files: on_nodes (docs/cloud.md, 'Limits on a cloud "
                "executor')"
            )
        return local(path)

    return user_path

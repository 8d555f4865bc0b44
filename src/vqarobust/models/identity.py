"""Which weights a model entry names, by content: what resumed inference compares and what
provenance records.

A local checkpoint (a folder saved with ``save_pretrained``, or a model the workflow
trained) is identified by the SHA-256 of its files (:func:`vqarobust.digests.tree_sha256`);
a Hub id by the commit its local cache resolves to (the snapshot folder's name, which the
Hub makes from the repository's content). A served model is known by its name at the
server only: nothing local identifies its weights, and the record says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vqarobust.digests import tree_sha256

# Entry keys that name a checkpoint (PNP-VQA has three components).
CHECKPOINT_KEYS = ("path_or_id", "itm_model", "caption_model", "qa_model")


def checkpoint_identity(entry: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per checkpoint key of ``entry``: ``{"path", "sha256"}``, ``{"hub_id", "commit"}``
    (``commit`` None when the id is not in the local cache) or, for a served model,
    ``{"served", "weights"}``."""
    if entry.get("family") == "openai-chat":
        return {"model": {"served": entry.get("model"), "weights": "unknown (served)"}}
    out: dict[str, dict[str, Any]] = {}
    for key in CHECKPOINT_KEYS:
        value = entry.get(key)
        if isinstance(value, str):
            out[key] = _identity(value, entry.get("revision"))
    return out


def _identity(path_or_id: str, revision: str | None) -> dict[str, Any]:
    local = Path(path_or_id)
    if local.exists():
        return {"path": path_or_id, "sha256": tree_sha256(local)}
    from huggingface_hub import snapshot_download

    try:
        snapshot = snapshot_download(path_or_id, revision=revision, local_files_only=True)
    except Exception:  # not cached: loading will fail with its own message
        return {"hub_id": path_or_id, "revision": revision, "commit": None}
    return {"hub_id": path_or_id, "revision": revision, "commit": Path(snapshot).name}

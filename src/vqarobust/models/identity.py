"""Which weights a model entry names, by content: resolved once, before anything else, so
that what resumed inference compares, what provenance records and what the adapter loads
are the same files.

A local checkpoint (a folder saved with ``save_pretrained``, or a model the workflow
trained) is identified by the SHA-256 of its files (:func:`vqarobust.digests.tree_sha256`);
a Hub id by the commit its snapshot resolved to (the snapshot folder's name, which the Hub
makes from the repository's content), after any download. The adapter is then given the
resolved folder itself, so a branch that moves on the Hub between the fingerprint and the
load cannot put other weights behind the recorded commit. A served model is known by its
name at the server only: nothing local identifies its weights, and the record says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqarobust.digests import tree_sha256
from vqarobust.models.loading import resolve_weights

# Entry keys that name a checkpoint (PNP-VQA has three components).
CHECKPOINT_KEYS = ("path_or_id", "itm_model", "caption_model", "qa_model")


@dataclass(frozen=True)
class ResolvedCheckpoints:
    """A model entry's checkpoints after resolution: ``entry`` is the entry to load (each
    Hub id replaced by its local snapshot folder, ``revision`` dropped, since it is spent)
    and ``identity`` what each checkpoint key resolved to (:func:`resolve_checkpoints`)."""

    entry: dict[str, Any]
    identity: dict[str, dict[str, Any]]


def resolve_checkpoints(
    entry: Mapping[str, Any], name: str = "model", allow_download: bool = False
) -> ResolvedCheckpoints:
    """Resolve every checkpoint ``entry`` names to local files and identify them.

    Per checkpoint key the identity is ``{"path", "sha256"}`` for a local folder, or
    ``{"hub_id", "revision", "commit"}`` for a Hub id: ``commit`` is the snapshot that
    resolution returned, downloaded first when ``allow_download`` (and then the Hub's
    current commit of ``revision``), else the one in the local cache. ``revision`` applies
    to ``path_or_id`` only, as the adapters apply it. Weights that cannot be resolved raise
    :class:`~vqarobust.models.loading.MissingWeightsError` naming the model and how to
    fetch them. A served model (``openai-chat``) resolves to ``{"served", "weights"}``."""
    if entry.get("family") == "openai-chat":
        served = {"model": {"served": entry.get("model"), "weights": "unknown (served)"}}
        return ResolvedCheckpoints(dict(entry), served)
    load = dict(entry)
    identity: dict[str, dict[str, Any]] = {}
    for key in CHECKPOINT_KEYS:
        value = entry.get(key)
        if not isinstance(value, str):
            continue
        revision = entry.get("revision") if key == "path_or_id" else None
        if Path(value).is_dir() and revision is None:
            identity[key] = {"path": value, "sha256": tree_sha256(value)}
            continue
        label = name if key == "path_or_id" else f"{name} ({key})"
        folder = resolve_weights(label, value, allow_download, revision)
        identity[key] = {"hub_id": value, "revision": revision, "commit": Path(folder).name}
        load[key] = folder
    if "revision" in load and "path_or_id" in identity and "hub_id" in identity["path_or_id"]:
        del load["revision"]
    return ResolvedCheckpoints(load, identity)

"""One row per model, the visual-robustness paper's Table 3 layout: family, checkpoint,
parameter count, clean accuracy and VRE with its interval (table ``model_cards``).

The family, the checkpoint identity and the parameter count come from the metadata each
prediction file carries (:func:`vqarobust.inference.run_inference` counts the parameters
of the model it loaded), so nothing is loaded again to describe a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

SCHEMA = {"model": pl.String, "family": pl.String, "checkpoint": pl.String, "parameters": pl.Int64}


def checkpoint_label(identity: Mapping[str, Mapping[str, Any]]) -> str:
    """A short text for a checkpoint identity: ``path (sha256 abcdef123456)``, ``id@commit``
    or ``served model name``; several checkpoints (PNP-VQA) joined by ``; ``."""
    parts = []
    for key, ident in sorted(identity.items()):
        if "sha256" in ident:
            text = f"{ident['path']} (sha256 {ident['sha256'][:12]})"
        elif "hub_id" in ident:
            text = f"{ident['hub_id']}@{(ident.get('commit') or 'not cached')[:12]}"
        else:
            text = f"served {ident.get('served')}"
        parts.append(text if len(identity) == 1 else f"{key}: {text}")
    return "; ".join(parts)


def card_rows(records: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """(model, family, checkpoint, parameters) from the prediction files' records; the
    parameter count is null where no job of the model loaded it (a served model)."""
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        inputs = record["inputs"]
        row = rows.setdefault(
            inputs["model"],
            {
                "model": inputs["model"],
                "family": inputs["spec"].get("family"),
                "checkpoint": checkpoint_label(inputs.get("checkpoint") or {}),
                "parameters": None,
            },
        )
        if record.get("parameters") is not None:
            row["parameters"] = int(record["parameters"])
    return pl.DataFrame(list(rows.values()), schema=SCHEMA).sort("model")

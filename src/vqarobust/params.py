"""What a Snakemake job is told through ``params``, and what it is not.

Snakemake reruns a job when the ``repr`` of one of its params changes. So params hold
only settings that can change the job's output, in a canonical form (mapping keys
sorted at every level): reordering the keys of a config mapping reruns nothing.
Settings that change only how fast or where a job runs (batch size, memory hints,
scheduler limits) reach the script from the config instead (:func:`runtime_options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Model-entry keys that never change an answer. batch_size does not either: a batch of
# questions of very different lengths answers like one request at a time in every
# family (tests/test_batch_invariance.py; docs/paper.md notes the bf16 caveat).
# For a served model, how hard it is pushed changes no answer either (where it is served
# does: answer_spec keeps the base_url's host as ``endpoint``).
SERVED_RUNTIME_KEYS = frozenset(
    {
        "base_url",
        "api_key_env",
        "max_concurrency",
        "adaptive_concurrency",
        "timeout_s",
        "max_retries",
        "request_budget",
    }
)
RUNTIME_KEYS = frozenset(
    {
        "batch_size",
        "gpu_memory_gb",
        "mem_mb",
        "runtime",
        "gpu_model",
        "allow_download",
        "share_image_features",
        *SERVED_RUNTIME_KEYS,
    }
)


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively); lists keep their order."""
    if isinstance(value, Mapping):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def answer_spec(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a model entry that can change its answers, canonical. (How replies
    are cut to short answers is code: the family's code digest covers it.)"""
    spec = {k: v for k, v in entry.items() if k not in RUNTIME_KEYS and k != "train"}
    if "base_url" in entry:
        # Another server may serve another model under the same name: where it is
        # served keys the answers, credentials and all else of the URL do not.
        from vqarobust.models.endpoint import endpoint_host

        spec["endpoint"] = endpoint_host(entry["base_url"])
    return canonical(spec)


def runtime_options(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The adapter options of a model entry that do not change answers."""
    adapter_keys = {"batch_size", "allow_download", "share_image_features", *SERVED_RUNTIME_KEYS}
    return {k: v for k, v in entry.items() if k in adapter_keys}

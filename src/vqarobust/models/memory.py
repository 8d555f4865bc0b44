"""GPU memory of a chat checkpoint, estimated from its own config and processor.

The estimate is three terms (docs/models.md, "GPU memory from the config"):

* the weights: the model built from ``config.json`` on PyTorch's ``meta`` device (no
  memory, no weights read) gives its exact parameter count, times the dtype's bytes;
* the KV cache of one batch: per token, 2 (keys and values) x layers x key-value heads x
  head size x dtype bytes, times the tokens of one request (its processor's prompt for a
  640x480 image, the size of a COCO photograph, plus ``max_new_tokens``) and the batch
  size;
* a fixed workspace for activations, the CUDA context and the allocator's slack.

Sliding-window layers (Gemma 2 and 3) keep fewer tokens than the full count, so the
estimate is an upper bound there.

The estimate runs in the scheduler (while the plan is built, on every dry run and on a
cluster's submit host), so it never runs a checkpoint's own code: transformers is always
called with ``trust_remote_code=False``, and a checkpoint whose model would come from its
own code (``auto_map`` with ``trust_remote_code: true``, or a ``model_type`` transformers
does not know) is a config error asking for the figure in GB.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

WORKSPACE_GB = 2.0
PROBE_SIZE = (640, 480)  # width, height: a COCO photograph
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Families whose entries may say gpu_memory_gb: auto (an AutoModelForImageTextToText).
AUTO_FAMILIES = ("llava", "image-text-to-text")
# The files of a checkpoint whose ``auto_map`` names code of its own that transformers
# imports under trust_remote_code: the model's config and its processor's parts.
CODE_FILES = (
    "config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "image_processor_config.json",
    "tokenizer_config.json",
)


@dataclass(frozen=True)
class MemoryEstimate:
    """One entry's estimate; ``total_gb`` is what a GPU job requests."""

    parameters: int
    dtype_bytes: int
    kv_bytes_per_token: int
    tokens_per_request: int
    batch_size: int
    workspace_gb: float = WORKSPACE_GB

    @property
    def weights_gb(self) -> float:
        """Parameters times the dtype's bytes."""
        return self.parameters * self.dtype_bytes / 1e9

    @property
    def kv_cache_gb(self) -> float:
        """The KV cache of one full batch."""
        return self.kv_bytes_per_token * self.tokens_per_request * self.batch_size / 1e9

    @property
    def total_gb(self) -> float:
        """Weights, KV cache and workspace."""
        return self.weights_gb + self.kv_cache_gb + self.workspace_gb


def text_config(config: Any) -> Any:
    """The language model's config of a multimodal config (itself when it has none)."""
    return getattr(config, "text_config", None) or config


def kv_bytes_per_token(config: Any, dtype_bytes: int) -> int:
    """Bytes of keys and values that one token adds to the cache, over every layer."""
    text = text_config(config)
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    return 2 * text.num_hidden_layers * kv_heads * head_dim * dtype_bytes


def parameter_count(config: Any) -> int:
    """The exact parameter count of the model ``config`` describes, built on the meta
    device (shared tensors, such as tied embeddings, counted once); transformers' own
    classes only."""
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, trust_remote_code=False)
    return sum(p.numel() for p in model.parameters())


def remote_code_reason(local: str, trust_remote_code: bool) -> str | None:
    """Why the estimate of the checkpoint folder ``local`` would need the checkpoint's own
    code (None when transformers' classes are the ones a job loads): a ``model_type``
    transformers does not know, or, when the entry trusts remote code, a file whose
    ``auto_map`` names the checkpoint's own classes (the job would load those, so an
    estimate from transformers' classes would be of another model). Reads JSON only."""
    from transformers import CONFIG_MAPPING

    folder = Path(local)
    model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    if model_type not in CONFIG_MAPPING:
        return f"its config.json's model_type {model_type!r} is not one transformers knows"
    if not trust_remote_code:
        return None
    for name in CODE_FILES:
        path = folder / name
        if path.is_file() and "auto_map" in json.loads(path.read_text()):
            return f"its {name} names code of its own (auto_map) and trust_remote_code is true"
    return None


def request_tokens(processor: Any, prompt: str, max_new_tokens: int) -> int:
    """Tokens of one request: the processor's input ids for ``prompt`` about a
    640x480 image (every image token counted), plus the generated ones."""
    from PIL import Image

    image = Image.new("RGB", PROBE_SIZE, (128, 128, 128))
    ids = processor(images=[[image]], text=[prompt], return_tensors="pt")["input_ids"]
    return int(ids.shape[1]) + max_new_tokens


def estimate_checkpoint(
    local: str,
    batch_size: int,
    dtype: str = "bfloat16",
    max_new_tokens: int | None = None,
    prompt: str | None = None,
) -> MemoryEstimate:
    """The estimate for the checkpoint folder ``local`` answering ``batch_size``
    requests at once in ``dtype`` (the chat adapter's prompt and answer length unless
    ``prompt`` and ``max_new_tokens`` say otherwise), from transformers' own classes:
    no code of the checkpoint runs (:func:`remote_code_reason` says when that is not the
    model a job would load)."""
    from transformers import AutoConfig, AutoProcessor

    from vqarobust.models.chat import (
        DEFAULT_MAX_NEW_TOKENS,
        DEFAULT_PROMPT,
        PREFIX_MODELS,
        PREFIX_PROMPT,
    )

    if max_new_tokens is None:
        max_new_tokens = DEFAULT_MAX_NEW_TOKENS

    if dtype not in DTYPE_BYTES:
        raise ValueError(
            f"dtype must be one of {sorted(DTYPE_BYTES)} for an estimate, got {dtype!r}"
        )
    config = AutoConfig.from_pretrained(local, trust_remote_code=False)
    processor = AutoProcessor.from_pretrained(local, trust_remote_code=False)
    if config.model_type in PREFIX_MODELS:
        text = processor.image_token + (prompt or PREFIX_PROMPT).format(question="What is it?")
    else:
        question = (prompt or DEFAULT_PROMPT).format(question="What is it?")
        content = [{"type": "image"}, {"type": "text", "text": question}]
        text = processor.apply_chat_template(
            [{"role": "user", "content": content}], add_generation_prompt=True
        )
    nbytes = DTYPE_BYTES[dtype]
    return MemoryEstimate(
        parameters=parameter_count(config),
        dtype_bytes=nbytes,
        kv_bytes_per_token=kv_bytes_per_token(config, nbytes),
        tokens_per_request=request_tokens(processor, text, max_new_tokens),
        batch_size=batch_size,
    )


def _entry_folder(name: str, entry: Mapping[str, Any]) -> str:
    """The entry's cached checkpoint folder (never downloaded); :class:`MissingWeightsError`
    when it is not cached."""
    from vqarobust.models.loading import resolve_weights

    return resolve_weights(name, entry["path_or_id"], False, entry.get("revision"))


def check_estimable(name: str, entry: Mapping[str, Any]) -> None:
    """A ``gpu_memory_gb: auto`` entry whose cached checkpoint the estimate can read
    without its code; else a :class:`~vqarobust.config.ConfigError` naming
    ``models.<name>.gpu_memory_gb``. Nothing to check for a number, or for a checkpoint
    not cached yet (its estimate is skipped with a warning)."""
    from vqarobust.config import ConfigError
    from vqarobust.models.loading import MissingWeightsError

    if entry.get("gpu_memory_gb") != "auto":
        return
    try:
        local = _entry_folder(name, entry)
    except MissingWeightsError:
        return
    reason = remote_code_reason(local, bool(entry.get("trust_remote_code", False)))
    if reason is not None:
        raise ConfigError(
            f"config error at models.{name}.gpu_memory_gb: auto estimates the memory in the "
            f"scheduler, which runs no code of a checkpoint, and {entry['path_or_id']} needs "
            f"its own: {reason}; set models.{name}.gpu_memory_gb to a number of GB"
        )


def estimate_entry(name: str, entry: Mapping[str, Any], dtype: str) -> MemoryEstimate:
    """The estimate for a chat config entry's cached checkpoint in ``dtype``, at its batch
    size, answer length and prompt; :class:`MissingWeightsError` when it is not cached."""
    from vqarobust.models import SMALL_BATCH_SIZE

    return estimate_checkpoint(
        _entry_folder(name, entry),
        entry.get("batch_size", SMALL_BATCH_SIZE),
        dtype,
        entry.get("max_new_tokens"),
        entry.get("prompt"),
    )


def entry_gpu_memory_gb(name: str, entry: Mapping[str, Any]) -> int | None:
    """What a GPU job of the entry requests, in whole GB: its ``gpu_memory_gb``, or, for
    ``auto``, the estimate from its cached checkpoint (rounded up); None, with a warning,
    when the checkpoint is not in the local cache yet (a dry run on another machine); a
    :class:`~vqarobust.config.ConfigError` when the estimate would need the checkpoint's
    own code (:func:`check_estimable`)."""
    value = entry.get("gpu_memory_gb")
    if value != "auto":
        return None if value is None else math.ceil(value)
    from vqarobust.models.loading import MissingWeightsError

    check_estimable(name, entry)
    dtype = entry.get("dtype", "auto")
    try:
        estimate = estimate_entry(name, entry, "bfloat16" if dtype == "auto" else dtype)
    except MissingWeightsError:
        log.warning(
            "model %r: gpu_memory_gb is auto but %s is not in the local cache; its "
            "jobs request no GPU memory",
            name,
            entry["path_or_id"],
        )
        return None
    return math.ceil(estimate.total_gb)

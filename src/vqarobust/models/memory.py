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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

WORKSPACE_GB = 2.0
PROBE_SIZE = (640, 480)  # width, height: a COCO photograph
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Families whose entries may say gpu_memory_gb: auto (an AutoModelForImageTextToText).
AUTO_FAMILIES = ("llava", "image-text-to-text")


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


def parameter_count(config: Any, trust_remote_code: bool = False) -> int:
    """The exact parameter count of the model ``config`` describes, built on the meta
    device (shared tensors, such as tied embeddings, counted once)."""
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, trust_remote_code=trust_remote_code)
    return sum(p.numel() for p in model.parameters())


def request_tokens(processor: Any, prompt: str, max_new_tokens: int) -> int:
    """Tokens of one request: the processor's input ids for ``prompt`` about a
    640x480 image (every image token counted), plus the generated ones."""
    from PIL import Image

    image = Image.new("RGB", PROBE_SIZE, (128, 128, 128))
    ids = processor(images=[[image]], text=[prompt], return_tensors="pt")["input_ids"]
    return int(ids.shape[1]) + max_new_tokens


def estimate_checkpoint(
    local: str, batch_size: int, dtype: str = "bfloat16", max_new_tokens: int | None = None,
    prompt: str | None = None, trust_remote_code: bool = False,
) -> MemoryEstimate:  # fmt: skip
    """The estimate for the checkpoint folder ``local`` answering ``batch_size``
    requests at once in ``dtype`` (the chat adapter's prompt and answer length unless
    ``prompt`` and ``max_new_tokens`` say otherwise)."""
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
    config = AutoConfig.from_pretrained(local, trust_remote_code=trust_remote_code)
    processor = AutoProcessor.from_pretrained(local, trust_remote_code=trust_remote_code)
    if config.model_type in PREFIX_MODELS:
        text = processor.image_token + (prompt or PREFIX_PROMPT).format(question="What is it?")
    else:
        question = (prompt or DEFAULT_PROMPT).format(question="What is it?")
        content = [{"type": "image"}, {"type": "text", "text": question}]
        text = processor.apply_chat_template([{"role": "user", "content": content}],
                                             add_generation_prompt=True)  # fmt: skip
    nbytes = DTYPE_BYTES[dtype]
    return MemoryEstimate(
        parameters=parameter_count(config, trust_remote_code),
        dtype_bytes=nbytes,
        kv_bytes_per_token=kv_bytes_per_token(config, nbytes),
        tokens_per_request=request_tokens(processor, text, max_new_tokens),
        batch_size=batch_size,
    )


def estimate_entry(name: str, entry: Mapping[str, Any], dtype: str) -> MemoryEstimate:
    """The estimate for a chat config entry's cached checkpoint in ``dtype``, at its batch
    size, answer length and prompt; :class:`MissingWeightsError` when it is not cached."""
    from vqarobust.models import SMALL_BATCH_SIZE
    from vqarobust.models.loading import resolve_weights

    local = resolve_weights(name, entry["path_or_id"], False, entry.get("revision"))
    return estimate_checkpoint(
        local, entry.get("batch_size", SMALL_BATCH_SIZE), dtype, entry.get("max_new_tokens"),
        entry.get("prompt"), entry.get("trust_remote_code", False),
    )  # fmt: skip


def entry_gpu_memory_gb(name: str, entry: Mapping[str, Any]) -> int | None:
    """What a GPU job of the entry requests, in whole GB: its ``gpu_memory_gb``, or, for
    ``auto``, the estimate from its cached checkpoint (rounded up); None, with a warning,
    when the checkpoint is not in the local cache yet (a dry run on another machine)."""
    value = entry.get("gpu_memory_gb")
    if value != "auto":
        return None if value is None else math.ceil(value)
    from vqarobust.models.loading import MissingWeightsError

    dtype = entry.get("dtype", "auto")
    try:
        estimate = estimate_entry(name, entry, "bfloat16" if dtype == "auto" else dtype)
    except MissingWeightsError:
        log.warning("model %r: gpu_memory_gb is auto but %s is not in the local cache; its "
                    "jobs request no GPU memory", name, entry["path_or_id"])  # fmt: skip
        return None
    return math.ceil(estimate.total_gb)

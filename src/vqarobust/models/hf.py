"""Shared loading of Hugging Face checkpoints for the adapters."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from transformers import AutoProcessor

from vqarobust.models import DEFAULT_BATCH_SIZE
from vqarobust.models.base import VQAModel, torch_dtype
from vqarobust.models.loading import (
    Loading,
    check_safetensors,
    resolve_weights,
    safetensors_option,
)


class HFVQAModel(VQAModel):
    """An adapter around one transformers model class and its ``AutoProcessor``.

    Subclasses set ``model_class``; constructor keyword arguments are the config entry.
    Weights load from safetensors only unless ``use_safetensors`` is false
    (:func:`~vqarobust.models.loading.check_safetensors`).
    """

    model_class: ClassVar[type]

    def __init__(
        self,
        path_or_id: str,
        batch_size: int = DEFAULT_BATCH_SIZE,
        trust_remote_code: bool = False,
        revision: str | None = None,
        **loading: Any,
    ) -> None:
        """``loading``: a :class:`~vqarobust.models.loading.Loading`'s fields (name,
        device, dtype, allow_download, use_safetensors)."""
        super().__init__(batch_size)
        placed = Loading(**loading)
        self.name = placed.name
        local = resolve_weights(placed.name, path_or_id, placed.allow_download, revision)
        check_safetensors(placed.name, local, placed.use_safetensors)
        self.use_safetensors = placed.use_safetensors
        self.device = torch.device(placed.device)
        self.dtype = torch_dtype(placed.dtype, self.device)
        self.load(local, trust_remote_code)

    def load(self, local: str, trust_remote_code: bool) -> None:
        """Load the processor and the model from the local checkpoint folder."""
        self.processor = AutoProcessor.from_pretrained(local, trust_remote_code=trust_remote_code)
        self.model = self.model_class.from_pretrained(
            local,
            dtype=self.dtype,
            trust_remote_code=trust_remote_code,
            use_safetensors=safetensors_option(self.use_safetensors),
        )
        self.model.to(self.device).eval()

"""Shared loading of Hugging Face checkpoints for the adapters."""

from __future__ import annotations

from typing import ClassVar

import torch
from transformers import AutoProcessor

from vqarobust.models import DEFAULT_BATCH_SIZE
from vqarobust.models.base import VQAModel, torch_dtype
from vqarobust.models.loading import resolve_weights


class HFVQAModel(VQAModel):
    """An adapter around one transformers model class and its ``AutoProcessor``.

    Subclasses set ``model_class``; constructor keyword arguments are the config entry.
    """

    model_class: ClassVar[type]

    def __init__(
        self,
        path_or_id: str,
        name: str = "model",
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "cpu",
        dtype: str = "auto",
        allow_download: bool = False,
        trust_remote_code: bool = False,
        revision: str | None = None,
    ) -> None:
        super().__init__(batch_size)
        self.name = name
        local = resolve_weights(name, path_or_id, allow_download, revision)
        self.device = torch.device(device)
        self.dtype = torch_dtype(dtype, self.device)
        self.load(local, trust_remote_code)

    def load(self, local: str, trust_remote_code: bool) -> None:
        """Load the processor and the model from the local checkpoint folder."""
        self.processor = AutoProcessor.from_pretrained(local, trust_remote_code=trust_remote_code)
        self.model = self.model_class.from_pretrained(
            local, dtype=self.dtype, trust_remote_code=trust_remote_code
        )
        self.model.to(self.device).eval()

"""Adapter for answer-classifier VQA models (ViLT, the CNN+BoW reference model, ...).

Loads any ``AutoModelForVisualQuestionAnswering`` checkpoint with its ``AutoProcessor``
and answers with the argmax over ``config.id2label``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import AutoModelForVisualQuestionAnswering

import vqarobust.models.cnn_bow  # noqa: F401  (registers the reference model with Auto)
from vqarobust.models import DEFAULT_BATCH_SIZE
from vqarobust.models.base import distinct_images
from vqarobust.models.hf import HFVQAModel


class ClassifierVQA(HFVQAModel):
    """A classifier over a fixed answer vocabulary."""

    model_class = AutoModelForVisualQuestionAnswering

    def __init__(
        self, path_or_id: str, batch_size: int = DEFAULT_BATCH_SIZE, **kwargs: Any
    ) -> None:
        super().__init__(path_or_id, batch_size=batch_size, **kwargs)
        self.id2label = {int(k): v for k, v in self.model.config.id2label.items()}
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.max_text_length = int(limit) if limit else None
        # Late-fusion models take one pixel row per distinct image plus an index.
        self._reuses_images = "image_index" in inspect.signature(self.model.forward).parameters

    def truncated(self, questions: Sequence[str]) -> list[bool]:
        """Questions longer than the text encoder's positions (special tokens included)."""
        if self.max_text_length is None:
            return [False] * len(questions)
        tokenizer = self.processor.tokenizer
        ids = tokenizer(list(questions), truncation=False, verbose=False)["input_ids"]
        return [len(x) > self.max_text_length for x in ids]

    @torch.inference_mode()
    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Argmax answers for one batch; each distinct image object is preprocessed once."""
        distinct, index = distinct_images(images)
        pixels = self.processor.image_processor(distinct, return_tensors="pt")
        text = self.processor.tokenizer(
            list(questions),
            padding="longest",
            truncation=self.max_text_length is not None,
            max_length=self.max_text_length,
            return_tensors="pt",
            # Without a position limit nothing is cut: the tokenizer's "longer than the
            # specified maximum" warning would be false (truncated() counts what is cut).
            verbose=self.max_text_length is not None,
        )
        inputs = {k: v.to(self.device) for k, v in text.items()}
        if self._reuses_images:
            inputs["image_index"] = index.to(self.device)
        for key, value in pixels.items():
            if not self._reuses_images:
                value = value[index]
            value = value.to(self.device)
            inputs[key] = value.to(self.model.dtype) if value.is_floating_point() else value
        logits = self.model(**inputs).logits
        return [self.id2label[i] for i in logits.argmax(-1).tolist()]

    @torch.inference_mode()
    def image_attention(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[np.ndarray] | None:
        """ViLT: the last layer's attention of the pooled [CLS] position (the answer
        classifier's input) over the image patches, mean over heads, on the patch grid;
        None for other classifiers (the CNN+BoW reference model has no attention)."""
        if getattr(self.model.config, "model_type", None) != "vilt":
            return None
        vilt = self.model.vilt
        out = []
        # One request at a time: ViLT samples the patches of a padded batch at random.
        for image, question in zip(images, questions, strict=True):
            pixels = self.processor.image_processor([image], return_tensors="pt")
            text = self.processor.tokenizer(
                [question], truncation=True, max_length=self.max_text_length, return_tensors="pt"
            )
            text = {k: v.to(self.device) for k, v in text.items()}
            # The patch embedding keeps each patch's grid position; ViLT shuffles them.
            embeds, masks, (where, (rows, cols)) = vilt.embeddings.visual_embed(
                pixels["pixel_values"].to(self.device, self.model.dtype),
                pixels["pixel_mask"].to(self.device),
                max_image_length=self.model.config.max_image_length,
            )
            result = vilt(**text, image_embeds=embeds, pixel_mask=masks, output_attentions=True)
            # Text tokens first, then the image's own [CLS], then its patches.
            start = text["input_ids"].shape[1] + 1
            weights = result.attentions[-1][0].float().mean(0)[0, start:]
            grid = torch.zeros(rows, cols, device=weights.device)
            grid.index_put_((where[0, :, 0], where[0, :, 1]), weights, accumulate=True)
            out.append(_normalized(grid))
        return out


def _normalized(grid: torch.Tensor) -> np.ndarray:
    """A float32 grid scaled to sum 1."""
    g = grid.detach().float().cpu().numpy()
    return (g / g.sum()).astype(np.float32)

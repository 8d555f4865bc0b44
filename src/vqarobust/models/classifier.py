"""Adapter for answer-classifier VQA models (ViLT, the CNN+BoW reference model, ...).

Loads any ``AutoModelForVisualQuestionAnswering`` checkpoint with its ``AutoProcessor``
and answers with the argmax over ``config.id2label``.
"""

from __future__ import annotations

import hashlib
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
        if self._is_vilt:
            embeds, masks = self._patch_embeddings(pixels)
            inputs["image_embeds"], inputs["pixel_mask"] = embeds[index], masks[index]
        else:
            if self._reuses_images:
                inputs["image_index"] = index.to(self.device)
            for key, value in pixels.items():
                if not self._reuses_images:
                    value = value[index]
                value = value.to(self.device)
                inputs[key] = value.to(self.model.dtype) if value.is_floating_point() else value
        logits = self.model(**inputs).logits
        return [self.id2label[i] for i in logits.argmax(-1).tolist()]

    @property
    def _is_vilt(self) -> bool:
        return getattr(self.model.config, "model_type", None) == "vilt"

    def _visual_embed(self, pixel_values: torch.Tensor, pixel_mask: torch.Tensor) -> tuple:
        """ViLT's patch embedding of one image, with its patch choice seeded by the image.

        ViLT draws which patches it keeps (and in which order) from torch's global random
        generator, so the same image would be embedded after whatever the process drew
        before (a resumed job after other work, another batch). Drawn here from a generator
        seeded by the image's pixels, it depends on the image alone."""
        # The image's own pixels, not the padding its batch gave it.
        valid = pixel_mask[0].bool()
        height, width = int(valid.any(1).sum()), int(valid.any(0).sum())
        own = pixel_values[0, :, :height, :width].contiguous().float().numpy()
        seed = int.from_bytes(hashlib.sha256(own.tobytes()).digest()[:8])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.model.vilt.embeddings.visual_embed(
                pixel_values.to(self.device, self.model.dtype),
                pixel_mask.to(self.device),
                max_image_length=self.model.config.max_image_length,
            )

    def _patch_embeddings(self, pixels: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Each distinct image's patch embedding (:meth:`_visual_embed`), padded to the
        longest with masked zero rows: the batch's ``image_embeds`` and their mask."""
        values, mask = pixels["pixel_values"], pixels["pixel_mask"]
        rows = [self._visual_embed(values[i : i + 1], mask[i : i + 1])
                for i in range(values.shape[0])]  # fmt: skip
        width = max(embeds.shape[1] for embeds, _, _ in rows)
        embeds = torch.zeros(len(rows), width, rows[0][0].shape[2], dtype=rows[0][0].dtype,
                             device=self.device)  # fmt: skip
        masks = torch.zeros(len(rows), width, dtype=rows[0][1].dtype, device=self.device)
        for i, (row, mask, _) in enumerate(rows):
            embeds[i, : row.shape[1]] = row[0]
            masks[i, : mask.shape[1]] = mask[0]
        return embeds, masks

    @torch.inference_mode()
    def image_attention(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[np.ndarray] | None:
        """ViLT: the last layer's attention of the pooled [CLS] position (the answer
        classifier's input) over the image patches, mean over heads, on the patch grid;
        None for other classifiers (the CNN+BoW reference model has no attention)."""
        if not self._is_vilt:
            return None
        vilt = self.model.vilt
        out = []
        # One request at a time: the map is of one image's own patches.
        for image, question in zip(images, questions, strict=True):
            pixels = self.processor.image_processor([image], return_tensors="pt")
            text = self.processor.tokenizer(
                [question], truncation=True, max_length=self.max_text_length, return_tensors="pt"
            )
            text = {k: v.to(self.device) for k, v in text.items()}
            # The patch embedding keeps each patch's grid position; ViLT shuffles them.
            embeds, masks, (where, (rows, cols)) = self._visual_embed(
                pixels["pixel_values"], pixels["pixel_mask"]
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

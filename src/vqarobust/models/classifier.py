"""Adapter for answer-classifier VQA models (ViLT, the CNN+BoW reference model, ...).

Loads any ``AutoModelForVisualQuestionAnswering`` checkpoint with its ``AutoProcessor``
and answers with the argmax over ``config.id2label``. What depends on the image alone
(ViLT's patch embedding, a late-fusion model's image features) is computed once per image
per chunk of questions, from that image on its own: a question's answer then does not
depend on which other images share its batch.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import AutoModelForVisualQuestionAnswering

import vqarobust.models.cnn_bow  # noqa: F401  (registers the reference model with Auto)
from vqarobust.models import DEFAULT_BATCH_SIZE
from vqarobust.models.base import SharesImageFeatures
from vqarobust.models.hf import HFVQAModel
from vqarobust.models.replies import Reply, argmax_labels

# ViLT draws its patches from torch's one global generator, which _visual_embed seeds per
# image: answers on threads take turns at it.
_GLOBAL_GENERATOR = threading.Lock()


class ClassifierVQA(SharesImageFeatures, HFVQAModel):
    """A classifier over a fixed answer vocabulary. It answers on threads at once: the
    tokenizer (a call sets its padding settings) and ViLT's seeded patch choice are taken
    in turn, the rest (images, the forward) at once."""

    model_class = AutoModelForVisualQuestionAnswering
    thread_safe = True
    keeps_features = True  # each encoder below takes one image at a time

    def __init__(
        self,
        path_or_id: str,
        batch_size: int = DEFAULT_BATCH_SIZE,
        share_image_features: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(path_or_id, batch_size=batch_size, **kwargs)
        self.share_image_features = share_image_features
        self.id2label = {int(k): v for k, v in self.model.config.id2label.items()}
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.max_text_length = int(limit) if limit else None
        # Late fusion (the CNN+BoW): image features that no question changes.
        self._encodes_images = bool(getattr(self.model, "image_features_shared", False))
        self._tokenizer_lock = threading.Lock()

    def truncated(self, questions: Sequence[str]) -> list[bool]:
        """Questions longer than the text encoder's positions (special tokens included)."""
        if self.max_text_length is None:
            return [False] * len(questions)
        with self._tokenizer_lock:
            tokenizer = self.processor.tokenizer
            ids = tokenizer(list(questions), truncation=False, verbose=False)["input_ids"]
        return [len(x) > self.max_text_length for x in ids]

    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str | Reply]:
        """Argmax answers for one batch (:meth:`logits` runs without autograd)."""
        return argmax_labels(self.logits(images, questions), self.id2label)

    def logits(self, images: Sequence[Image.Image], questions: Sequence[str]) -> torch.Tensor:
        """The answer logits of one batch, one row per request; within
        :meth:`respond_all`, each distinct image's side is computed once."""
        with self._tokenizer_lock:
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
        with torch.inference_mode():
            if self._is_vilt:
                rows = self.image_features(images, self._patch_rows)
                inputs["image_embeds"], inputs["pixel_mask"] = _padded(rows, self.device)
            elif self._encodes_images:
                inputs["image_features"] = torch.stack(self.image_features(images, self._encode))
            else:
                return self._logits_by_size(inputs, self.image_features(images, self._pixel_rows))
            return self.model(**inputs).logits

    def _logits_by_size(self, inputs: dict[str, torch.Tensor], rows: list[dict]) -> torch.Tensor:
        """Requests whose images were preprocessed to different sizes cannot share a pixel
        tensor: one forward per size, the logits put back in request order."""
        sizes = [tuple(row["pixel_values"].shape) for row in rows]
        out: list[torch.Tensor] = [torch.empty(0)] * len(rows)
        for size in dict.fromkeys(sizes):
            idx = [i for i, s in enumerate(sizes) if s == size]
            group = {k: v[idx] for k, v in inputs.items()}
            for key in rows[idx[0]]:
                value = torch.stack([rows[i][key] for i in idx]).to(self.device)
                group[key] = value.to(self.model.dtype) if value.is_floating_point() else value
            for i, row in zip(idx, self.model(**group).logits, strict=True):
                out[i] = row
        return torch.stack(out)

    def _pixels(self, image: Image.Image) -> Any:
        """One image through the processor on its own (no padding to a batch's largest)."""
        return self.processor.image_processor([image], return_tensors="pt")

    def _patch_rows(self, images: Sequence[Image.Image]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """ViLT: per image, its patch embedding and patch mask (:meth:`_visual_embed`)."""
        rows = []
        for image in images:
            pixels = self._pixels(image)
            embeds, mask, _ = self._visual_embed(pixels["pixel_values"], pixels["pixel_mask"])
            rows.append((embeds[0], mask[0]))
        return rows

    def _pixel_rows(self, images: Sequence[Image.Image]) -> list[dict[str, torch.Tensor]]:
        """Per image, what the processor makes of it alone (its batch dimension dropped)."""
        return [{k: v[0] for k, v in self._pixels(image).items()} for image in images]

    def _encode(self, images: Sequence[Image.Image]) -> list[torch.Tensor]:
        """Late fusion: per image, the model's question-independent image features."""
        out = []
        for image in images:
            values = self._pixels(image)["pixel_values"].to(self.device, self.model.dtype)
            out.append(self.model.encode_images(values)[0])
        return out

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
        # ViLT draws on the CPU generator whatever the device; seeding only that one skips
        # torch.manual_seed's deferred CUDA seeding, which records a stack trace per call
        # (a fifth of a ViLT job's time on the CPU).
        with _GLOBAL_GENERATOR, torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(seed)
            return self.model.vilt.embeddings.visual_embed(
                pixel_values.to(self.device, self.model.dtype),
                pixel_mask.to(self.device),
                max_image_length=self.model.config.max_image_length,
            )

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


def _padded(
    rows: Sequence[tuple[torch.Tensor, torch.Tensor]], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per request, its image's patch embedding and mask, padded to the batch's longest
    with masked zero rows: the batch's ``image_embeds`` and ``pixel_mask``."""
    width = max(embeds.shape[0] for embeds, _ in rows)
    first = rows[0][0]
    embeds = torch.zeros(len(rows), width, first.shape[1], dtype=first.dtype, device=device)
    masks = torch.zeros(len(rows), width, dtype=rows[0][1].dtype, device=device)
    for i, (row, mask) in enumerate(rows):
        embeds[i, : row.shape[0]] = row
        masks[i, : mask.shape[0]] = mask
    return embeds, masks


def _normalized(grid: torch.Tensor) -> np.ndarray:
    """A float32 grid scaled to sum 1."""
    g = grid.detach().float().cpu().numpy()
    return (g / g.sum()).astype(np.float32)

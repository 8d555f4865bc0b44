"""Adapter for BLIP VQA models (``BlipForQuestionAnswering``): generative answer decoder.

Each distinct image is encoded once by the vision model per ``respond_all`` call (one
chunk of a job) and its features are shared by all of its questions; the question
encoder and answer decoder then run as in
``BlipForQuestionAnswering.generate`` (greedy decoding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BlipForQuestionAnswering, LogitsProcessorList

from vqarobust.models.base import GeneratesReplies, SharesImageFeatures
from vqarobust.models.finite_scores import FiniteScores
from vqarobust.models.hf import HFVQAModel
from vqarobust.models.replies import Reply


class BlipVQA(SharesImageFeatures, GeneratesReplies, HFVQAModel):
    """BLIP for VQA (e.g. ``Salesforce/blip-vqa-base``)."""

    model_class = BlipForQuestionAnswering

    def __init__(
        self,
        path_or_id: str,
        max_new_tokens: int = 10,
        share_image_features: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(path_or_id, **kwargs)
        self.max_new_tokens = max_new_tokens
        # Off only to measure what sharing saves (benchmarks/feature_reuse.py).
        self.share_image_features = share_image_features

    def _encode(self, images: list[Image.Image]) -> torch.Tensor:
        pixels = self.processor.image_processor(images, return_tensors="pt")["pixel_values"]
        return self.model.vision_model(pixel_values=pixels.to(self.device, self.model.dtype))[0]

    @torch.inference_mode()
    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str | Reply]:
        """Greedy replies for one batch."""
        text = self.processor.tokenizer(list(questions), padding="longest", return_tensors="pt")
        text = {k: v.to(self.device) for k, v in text.items()}
        m = self.model
        image_embeds = torch.stack(self.image_features(images, self._encode))
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=self.device)
        question_embeds = m.text_encoder(
            input_ids=text["input_ids"],
            attention_mask=text["attention_mask"],
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=image_mask,
            return_dict=False,
        )[0]
        # The decoder reads each question's own tokens, never the padding its batch gave
        # it: transformers' BLIP decoder attends to padded question positions whatever
        # encoder_attention_mask says (BlipForQuestionAnswering.generate's answers change
        # with the longest question of the batch). Questions of one token count decode
        # together, unpadded; the encoder's outputs at real tokens are padding-free.
        if self.processor.tokenizer.padding_side != "right":
            raise ValueError(f"model {self.name!r}: BLIP's tokenizer must pad on the right")
        lengths = text["attention_mask"].sum(1)
        replies: list[str | Reply] = [""] * len(questions)
        for n in sorted(set(lengths.tolist())):
            idx = (lengths == n).nonzero().flatten()
            out = m.text_decoder.generate(
                input_ids=torch.full((len(idx), 1), m.decoder_start_token_id, device=self.device),
                eos_token_id=m.config.text_config.sep_token_id,
                pad_token_id=m.config.text_config.pad_token_id,
                encoder_hidden_states=question_embeds[idx, :n],
                encoder_attention_mask=torch.ones(
                    len(idx), n, dtype=torch.long, device=self.device
                ),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                logits_processor=LogitsProcessorList([check := FiniteScores(len(idx))]),
            )
            decoded = self.processor.tokenizer.batch_decode(out, skip_special_tokens=True)
            for i, reply in zip(idx.tolist(), check.mark(decoded), strict=True):
                replies[i] = reply
        return replies

    @torch.inference_mode()
    def image_attention(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[np.ndarray] | None:
        """The question encoder's last cross-attention over the image patches (what the
        answer decoder reads: it attends to the encoded question only), mean over heads
        and over the question's tokens, on the square patch grid."""
        text = self.processor.tokenizer(list(questions), padding="longest", return_tensors="pt")
        text = {k: v.to(self.device) for k, v in text.items()}
        image_embeds = self._encode(list(images))
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=self.device)
        result = self.model.text_encoder(
            input_ids=text["input_ids"],
            attention_mask=text["attention_mask"],
            encoder_hidden_states=image_embeds,
            encoder_attention_mask=image_mask,
            output_attentions=True,
            return_dict=True,
        )
        # (batch, heads, tokens, 1 + patches): drop the image's [CLS], mean over heads.
        cross = result.cross_attentions[-1].float().mean(1)[:, :, 1:]
        tokens = text["attention_mask"].float()
        per = (cross * tokens[..., None]).sum(1) / tokens.sum(1, keepdim=True)
        side = int(round(per.shape[1] ** 0.5))
        if side * side != per.shape[1]:
            raise ValueError(f"BLIP image tokens ({per.shape[1]}) do not form a square grid")
        grids = per.reshape(-1, side, side)
        return [(g / g.sum()).cpu().numpy().astype(np.float32) for g in grids]

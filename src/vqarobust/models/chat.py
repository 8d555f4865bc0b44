"""Adapter for chat multimodal LLMs: LLaVA and any ``AutoModelForImageTextToText`` checkpoint.

Each question becomes a one-turn conversation (an image, then the question and an
instruction to answer with a single word or phrase), rendered with the processor's chat
template; PaliGemma, which has none, takes its task prefix (``answer en``). Batches are
left-padded and decoded greedily; only the new tokens are decoded (the raw reply), and the
answer is the reply cut to a short answer (docs/models.md, "From reply to answer").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, LlavaForConditionalGeneration

from vqarobust.models import SMALL_BATCH_SIZE
from vqarobust.models.base import GeneratesReplies, SharesImageFeatures
from vqarobust.models.hf import HFVQAModel

DEFAULT_PROMPT = "{question}\nAnswer the question using a single word or phrase."
# PaliGemma's mix checkpoints answer VQA after this task prefix (its model card's format).
PREFIX_PROMPT = "answer en {question}"
# Architectures prompted by a task prefix, not a chat template (config.model_type).
PREFIX_MODELS = ("paligemma",)
# Processor outputs that are training targets, not inputs: PaliGemma's processor returns
# ``labels``, on which a forward pass would compute a loss. Anything else it returns goes
# to the model, which rejects what it does not take.
TARGETS = ("labels",)


class ChatVQA(GeneratesReplies, HFVQAModel):
    """A chat-template image-text-to-text model answering one question per conversation."""

    model_class = AutoModelForImageTextToText

    def __init__(
        self,
        path_or_id: str,
        batch_size: int = SMALL_BATCH_SIZE,
        max_new_tokens: int = 10,
        prompt: str | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name", "model")
        if prompt is not None and "{question}" not in prompt:
            raise ValueError(f"model {name!r}: prompt must contain '{{question}}', got {prompt!r}")
        super().__init__(path_or_id, batch_size=batch_size, **kwargs)
        self.prefix = self.model.config.model_type in PREFIX_MODELS
        if not self.prefix and getattr(self.processor, "chat_template", None) is None:
            raise ValueError(f"model {name!r}: its processor has no chat template")
        tokenizer = self.processor.tokenizer
        # Generation continues the last token of each row: pad on the left.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.max_new_tokens = max_new_tokens
        self.prompt = prompt or (PREFIX_PROMPT if self.prefix else DEFAULT_PROMPT)

    def _prompts(self, questions: Sequence[str]) -> list[str]:
        """Each question as a one-turn conversation rendered by the chat template (or, for
        a prefix model, its image token and the task prefix)."""
        if self.prefix:
            image = self.processor.image_token
            return [image + self.prompt.format(question=q) for q in questions]
        prompts = []
        for q in questions:
            text = {"type": "text", "text": self.prompt.format(question=q)}
            conversation = [{"role": "user", "content": [{"type": "image"}, text]}]
            prompts.append(
                self.processor.apply_chat_template(conversation, add_generation_prompt=True)
            )
        return prompts

    def _inputs(self, images: Sequence[Image.Image], questions: Sequence[str]) -> dict[str, Any]:
        """The processor's batch on the model's device: one image per conversation (a list
        per request, as multi-image processors expect), floating tensors in its dtype."""
        batch = self.processor(
            images=[[im] for im in images], text=self._prompts(questions), padding=True,
            return_tensors="pt",
        )  # fmt: skip
        return {
            k: (v.to(self.device, self.model.dtype) if v.is_floating_point() else v.to(self.device))
            for k, v in batch.items()
            if k not in TARGETS
        }

    @torch.inference_mode()
    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Greedy replies for one batch: the new tokens only."""
        inputs = self._inputs(images, questions)
        out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        new_tokens = out[:, inputs["input_ids"].shape[1] :]
        return self.processor.batch_decode(new_tokens, skip_special_tokens=True)


class LlavaVQA(SharesImageFeatures, ChatVQA):
    """LLaVA-1.5 (``LlavaForConditionalGeneration``), e.g. ``llava-hf/llava-1.5-7b-hf``.

    The vision tower and projector run once per distinct image per ``answer_all`` call
    (a chunk of a job); the projected
    features are scattered into the placeholder tokens of every question about it, and
    the language model generates from those embeddings.
    """

    model_class = LlavaForConditionalGeneration

    def __init__(self, path_or_id: str, share_image_features: bool = True, **kwargs: Any) -> None:
        super().__init__(path_or_id, **kwargs)
        self.share_image_features = share_image_features

    def _encode(self, images: list[Image.Image]) -> list[torch.Tensor]:
        pixels = self.processor.image_processor(images, return_tensors="pt")["pixel_values"]
        cfg = self.model.config
        return self.model.model.get_image_features(
            pixel_values=pixels.to(self.device, self.model.dtype),
            vision_feature_layer=cfg.vision_feature_layer,
            vision_feature_select_strategy=cfg.vision_feature_select_strategy,
        ).pooler_output

    @torch.inference_mode()
    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Greedy replies for one batch, encoding each distinct image once."""
        if not self.share_image_features:
            return super().reply(images, questions)
        texts = self._prompts(questions)
        # The processor expands each image placeholder to the image's token count.
        text = self.processor(images=list(images), text=texts, padding=True, return_tensors="pt")
        input_ids = text["input_ids"].to(self.device)
        attention_mask = text["attention_mask"].to(self.device)
        cfg = self.model.config
        per_request = torch.cat(self.image_features(images, self._encode), dim=0)
        embeds = self.model.get_input_embeddings()(input_ids)
        mask = (input_ids == cfg.image_token_id).unsqueeze(-1).expand_as(embeds)
        embeds = embeds.masked_scatter(mask, per_request.to(embeds.dtype))
        # With embeddings only, generate returns just the new tokens.
        out = self.model.generate(
            inputs_embeds=embeds,
            attention_mask=attention_mask,
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
        )
        return self.processor.batch_decode(out, skip_special_tokens=True)

    @torch.inference_mode()
    def image_attention(
        self, images: Sequence[Image.Image], questions: Sequence[str]
    ) -> list[np.ndarray] | None:
        """The language model's last-layer attention of the last prompt position (the one
        that emits the first answer token) over the image tokens, mean over heads, on the
        square grid of the image's tokens. Eager attention is switched on for the call
        (fused kernels return no weights) and switched back."""
        inputs = self._inputs(images, questions)
        before = self.model.config._attn_implementation
        self.model.set_attn_implementation("eager")
        try:
            result = self.model(**inputs, output_attentions=True)
        finally:
            self.model.set_attn_implementation(before)
        last = (
            result.attentions[-1].float().mean(1)[:, -1, :]
        )  # left-padded: -1 is the prompt's end
        is_image = inputs["input_ids"] == self.model.config.image_token_id
        grids = []
        for weights, where in zip(last, is_image, strict=True):
            w = weights[where]
            side = int(round(w.numel() ** 0.5))
            if side * side != w.numel():
                raise ValueError(f"{w.numel()} image tokens do not form a square grid")
            grids.append((w / w.sum()).reshape(side, side).cpu().numpy().astype(np.float32))
        return grids

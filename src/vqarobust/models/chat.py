"""Adapter for chat multimodal LLMs: LLaVA and any ``AutoModelForImageTextToText`` checkpoint.

Each question becomes a one-turn conversation (an image, then the question and an
instruction to answer with a single word or phrase), rendered with the processor's chat
template; PaliGemma, which has none, takes its task prefix (``answer en``). Batches are
left-padded and decoded greedily; only the new tokens are decoded (the raw reply), and the
answer is the reply cut to a short answer (docs/models.md, "From reply to answer").
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import (
    AutoModelForImageTextToText,
    LlavaForConditionalGeneration,
    LogitsProcessorList,
)

from vqarobust.models import SMALL_BATCH_SIZE
from vqarobust.models.base import GeneratesReplies, SharesImageFeatures
from vqarobust.models.finite_scores import FiniteScores
from vqarobust.models.hf import HFVQAModel
from vqarobust.models.replies import Reply

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "{question}\nAnswer the question using a single word or phrase."
# Short answers take 1-3 tokens; the memory estimate counts this many per request.
DEFAULT_MAX_NEW_TOKENS = 10
# PaliGemma's mix checkpoints answer VQA after this task prefix (its model card's format).
PREFIX_PROMPT = "answer en {question}"
# Architectures prompted by a task prefix, not a chat template (config.model_type).
PREFIX_MODELS = ("paligemma",)
# Processor outputs that are training targets, not inputs: PaliGemma's processor returns
# ``labels``, on which a forward pass would compute a loss. Anything else it returns goes
# to the model (less the pixels when their encoder outputs are shared), which rejects
# what it does not take.
TARGETS = ("labels",)
# The architectures (config.model_type) whose shared image features are tested to give
# the plain path's replies (tests/test_vlm_architectures.py, tests/test_generative_models.py).
# Another architecture's encoder output may differ (features per question, as InstructBLIP's
# Q-Former gives; fields the split drops, as Fuyu's), so it never shares.
SHARED_ENCODERS = (
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen3_vl",
    "idefics3",
    "smolvlm",
    "llava_onevision",
    "gemma3",
    "paligemma",
    "llava",
)


class ChatVQA(SharesImageFeatures, GeneratesReplies, HFVQAModel):
    """A chat-template image-text-to-text model answering one question per conversation.

    For the architectures of ``SHARED_ENCODERS`` (unless ``share_image_features`` is false), the
    vision encoder runs once per distinct image per :meth:`respond_all` call (a chunk of a
    job), and ``generate`` receives the encoder's outputs for every question about it
    (transformers' ``mm_encoder_outputs``) instead of pixels: the language side, its
    placeholder tokens and position ids (Qwen's M-RoPE, Gemma 3's image attention) are the
    model's own path. The cached outputs wait in host memory, so the GPU holds only one
    batch's, as without sharing.
    """

    model_class = AutoModelForImageTextToText

    def __init__(
        self,
        path_or_id: str,
        batch_size: int = SMALL_BATCH_SIZE,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        prompt: str | None = None,
        share_image_features: bool | None = None,
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
        self.share_image_features = self._sharing(name, share_image_features)

    def _sharing(self, name: str, requested: bool | None) -> bool:
        """Whether to share encoder outputs: yes for a tested architecture
        (``SHARED_ENCODERS``) whose ``forward`` takes them, unless the entry says no. Any
        other model encodes every request: logged by default, an error where asked."""
        model, kind = self.model, self.model.config.model_type
        takes = "mm_encoder_outputs" in inspect.signature(model.forward).parameters
        if kind in SHARED_ENCODERS and takes:
            return requested is not False
        why = (
            f"{type(model).__name__}.forward takes no precomputed image features"
            if not takes
            else f"sharing image features is tested for {', '.join(SHARED_ENCODERS)}, not {kind}"
        )
        if requested:
            # Another layout may hold features per question, or fields the split drops.
            raise ValueError(
                f"model {name!r}: share_image_features is true, but {why}; leave it out"
            )
        if requested is None:
            log.warning("model %r: %s; every request's image is encoded", name, why)
        return False

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

    def _inputs(
        self, images: Sequence[Image.Image], questions: Sequence[str], pixels: bool = True
    ) -> dict[str, Any]:
        """The processor's batch on the model's device: one image per conversation (a list
        per request, as multi-image processors expect), floating tensors in its dtype.
        Without ``pixels``, the pixel values stay behind (the tokens, image sizes and
        grids that the text side needs come along)."""
        batch = self._process(images, self._prompts(questions))
        dropped = TARGETS if pixels else (*TARGETS, "pixel_values")
        return {k: self._on_device(v) for k, v in batch.items() if k not in dropped}

    def _process(self, images: Sequence[Image.Image], prompts: list[str]) -> Any:
        """The processor's padded batch: one image per conversation, as a list per request
        (as multi-image processors expect)."""
        return self.processor(
            images=[[im] for im in images], text=prompts, padding=True, return_tensors="pt"
        )

    def _on_device(self, value: torch.Tensor) -> torch.Tensor:
        if value.is_floating_point():
            return value.to(self.device, self.model.dtype)
        return value.to(self.device)

    def _encode(self, images: list[Image.Image]) -> list[Any]:
        """The vision encoder's output for each image, one encoder call for all of them,
        split per image and kept in host memory."""
        batch = self._process(images, self._prompts([""] * len(images)))
        encoder = self.model.base_model.get_image_features
        wanted = inspect.signature(encoder).parameters
        kwargs = {k: self._on_device(v) for k, v in batch.items() if k in wanted}
        output = encoder(**kwargs, return_dict=True)
        try:
            return split_encoder_output(output, len(images))
        except ValueError as exc:
            # Crops of one image as images of their own (Gemma 3's pan-and-scan).
            raise ValueError(
                f"model {self.name!r}: its image features do not split per image ({exc}); "
                "set share_image_features: false"
            ) from exc

    @torch.inference_mode()
    def reply(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str | Reply]:
        """Greedy replies for one batch: the new tokens only."""
        inputs = self._inputs(images, questions, pixels=not self.share_image_features)
        if self.share_image_features:
            per_request = self.image_features(images, self._encode)
            inputs["mm_encoder_outputs"] = {"image": join_encoder_outputs(per_request, self.device)}
        check = FiniteScores(len(questions))
        out = self.model.generate(
            **inputs,
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            logits_processor=LogitsProcessorList([check]),
        )
        new_tokens = out[:, inputs["input_ids"].shape[1] :]
        return check.mark(self.processor.batch_decode(new_tokens, skip_special_tokens=True))


def split_encoder_output(output: Any, n: int) -> list[Any]:
    """One vision-encoder output for ``n`` images as ``n`` outputs of one image each, in
    host memory, keeping only what the language side reads: the projected features
    (``pooler_output``: per image a sequence element, or a row of a batched tensor) and
    Qwen3-VL's ``deepstack_features`` (per layer, then per image). Hidden states would only
    fill the cache. :func:`join_encoder_outputs` is its inverse."""
    fields = {"pooler_output": _per_image(output.pooler_output, n)}
    deepstack = getattr(output, "deepstack_features", None)
    if deepstack is not None:
        layers = [_per_image(layer, n) for layer in deepstack]
        fields["deepstack_features"] = [[layer[i] for layer in layers] for i in range(n)]
    return [type(output)(**{k: v[i] for k, v in fields.items()}) for i in range(n)]


def join_encoder_outputs(outputs: Sequence[Any], device: torch.device) -> Any:
    """Outputs of one image each (one per request, repeats allowed) as one output of the
    batch's images in request order, on ``device``."""
    first = outputs[0]
    fields = {"pooler_output": _concat([o.pooler_output for o in outputs], device)}
    if getattr(first, "deepstack_features", None) is not None:
        depth = len(first.deepstack_features)
        fields["deepstack_features"] = [
            _concat([o.deepstack_features[d] for o in outputs], device) for d in range(depth)
        ]
    return type(first)(**fields)


def _per_image(value: Any, n: int) -> list[Any]:
    """Per image, a part of ``value`` of the same kind: a one-element sequence, or a
    one-row tensor."""
    # Copies: a view would keep the whole call's tensor alive until its last image leaves.
    if isinstance(value, torch.Tensor):
        parts = [value[i : i + 1].to("cpu", copy=True) for i in range(value.shape[0])]
    else:
        parts = [type(value)([v.to("cpu", copy=True)]) for v in value]
    if len(parts) != n:
        # An encoder that packs images otherwise: its parts would go to the wrong requests.
        raise ValueError(f"the vision encoder returned {len(parts)} parts for {n} images")
    return parts


def _concat(parts: Sequence[Any], device: torch.device) -> Any:
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts, dim=0).to(device)
    return type(parts[0])(t.to(device) for part in parts for t in part)


class LlavaVQA(ChatVQA):
    """LLaVA-1.5 (``LlavaForConditionalGeneration``), e.g. ``llava-hf/llava-1.5-7b-hf``:
    the chat path, and the language model's attention over the image tokens."""

    model_class = LlavaForConditionalGeneration

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

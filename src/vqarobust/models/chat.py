"""Adapter for chat multimodal LLMs: LLaVA and any ``AutoModelForImageTextToText`` checkpoint.

Each question becomes a one-turn conversation (an image, then the question and an
instruction to answer with a single word or phrase), rendered with the processor's chat
template. Batches are left-padded, decoded greedily, and only the new tokens are decoded
and cut to a short answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from PIL import Image
from transformers import (
    AutoModelForImageTextToText,
    AutoProcessor,
    LlavaForConditionalGeneration,
)

from vqarobust.models.base import VQAModel, torch_dtype
from vqarobust.models.loading import resolve_weights
from vqarobust.models.postprocess import short_answer

DEFAULT_PROMPT = "{question}\nAnswer the question using a single word or phrase."


class ChatVQA(VQAModel):
    """A chat-template image-text-to-text model answering one question per conversation."""

    model_class: type = AutoModelForImageTextToText

    def __init__(
        self,
        path_or_id: str,
        name: str = "model",
        batch_size: int = 8,
        device: str = "cpu",
        dtype: str = "auto",
        allow_download: bool = False,
        trust_remote_code: bool = False,
        max_new_tokens: int = 10,
        prompt: str = DEFAULT_PROMPT,
    ) -> None:
        super().__init__(batch_size)
        if "{question}" not in prompt:
            raise ValueError(f"model {name!r}: prompt must contain '{{question}}', got {prompt!r}")
        local = resolve_weights(name, path_or_id, allow_download)
        self.device = torch.device(device)
        self.processor = AutoProcessor.from_pretrained(local, trust_remote_code=trust_remote_code)
        # Generation continues the last token of each row: pad on the left.
        self.processor.tokenizer.padding_side = "left"
        if self.processor.tokenizer.pad_token is None:
            self.processor.tokenizer.pad_token = self.processor.tokenizer.eos_token
        if getattr(self.processor, "chat_template", None) is None:
            raise ValueError(f"model {name!r}: its processor has no chat template")
        self.model = self.model_class.from_pretrained(
            local, dtype=torch_dtype(dtype, self.device), trust_remote_code=trust_remote_code
        )
        self.model.to(self.device).eval()
        self.max_new_tokens = max_new_tokens
        self.prompt = prompt

    def _conversation(self, question: str) -> list[dict]:
        content = [
            {"type": "image"},
            {"type": "text", "text": self.prompt.format(question=question)},
        ]
        return [{"role": "user", "content": content}]

    @torch.inference_mode()
    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """Greedy short answers for one batch."""
        texts = [
            self.processor.apply_chat_template(self._conversation(q), add_generation_prompt=True)
            for q in questions
        ]
        inputs = self.processor(images=list(images), text=texts, padding=True, return_tensors="pt")
        inputs = {
            k: (v.to(self.device, self.model.dtype) if v.is_floating_point() else v.to(self.device))
            for k, v in inputs.items()
        }
        out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
        new_tokens = out[:, inputs["input_ids"].shape[1] :]
        replies = self.processor.batch_decode(new_tokens, skip_special_tokens=True)
        return [short_answer(r) for r in replies]


class LlavaVQA(ChatVQA):
    """LLaVA-1.5 (``LlavaForConditionalGeneration``), e.g. ``llava-hf/llava-1.5-7b-hf``."""

    model_class = LlavaForConditionalGeneration

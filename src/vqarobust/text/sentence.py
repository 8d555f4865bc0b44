"""Sentence-level question rewrites (formal, casual, passive, active, back-translation)
through configured Hugging Face text-to-text models.

Each is a ``text`` perturbation with one level (severity 1): the whole question is
rewritten, greedily (deterministic, so no seed). ``back_translation`` runs two models:
to a pivot language and back. Nothing is rewritten unless the config names a model
(``text.sentence``); the models load with the same offline rules as VQA models (a local
folder, or a Hub id already in the cache).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from vqarobust.text.registry import TEXT_PERTURBATIONS

log = logging.getLogger(__name__)

SENTENCE_PERTURBATIONS = ("formal", "casual", "passive", "active", "back_translation")
DEFAULT_PROMPT = "{question}"
# Registered with the other text perturbations (level "sentence", one level), so that the
# one registry knows every perturbation name; the object is :func:`rewrite`.
for _name in SENTENCE_PERTURBATIONS:
    TEXT_PERTURBATIONS.register(_name, level="sentence", severities=1)(
        lambda questions, settings, _n=_name: rewrite(questions, _n, settings)
    )


class Rewriter:
    """A seq2seq model that rewrites questions: ``prompt`` (with ``{question}``) is fed to
    ``AutoModelForSeq2SeqLM`` and the greedy output is the rewrite."""

    def __init__(
        self,
        path_or_id: str,
        prompt: str = DEFAULT_PROMPT,
        max_new_tokens: int = 48,
        batch_size: int = 32,
        device: str = "cpu",
        revision: str | None = None,
        allow_download: bool = False,
        name: str = "rewriter",
    ) -> None:
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from vqarobust.models.loading import resolve_weights

        if "{question}" not in prompt:
            raise ValueError(f"{name}: prompt must contain {{question}}, got {prompt!r}")
        local = resolve_weights(name, path_or_id, allow_download, revision)
        self.tokenizer = AutoTokenizer.from_pretrained(local)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(local).to(device).eval()
        self.prompt, self.max_new_tokens = prompt, max_new_tokens
        self.batch_size, self.device = batch_size, device

    def __call__(self, questions: Sequence[str]) -> list[str]:
        """The rewrites of ``questions``, in order."""
        import torch

        out: list[str] = []
        for start in range(0, len(questions), self.batch_size):
            batch = [
                self.prompt.format(question=q) for q in questions[start : start + self.batch_size]
            ]
            inputs = self.tokenizer(batch, return_tensors="pt", padding=True, truncation=True)
            inputs.pop("token_type_ids", None)
            with torch.inference_mode():
                ids = self.model.generate(
                    **inputs.to(self.device), max_new_tokens=self.max_new_tokens, do_sample=False
                )
            out += [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]
        return out


def rewrite(
    questions: Sequence[str], name: str, settings: Mapping[str, Any]
) -> tuple[list[str], int]:
    """Rewrite ``questions`` with the models of ``settings`` (``model``, and for
    back-translation ``back_model``; ``prompt``/``back_prompt``, ``max_new_tokens``,
    ``batch_size``, ``device``, ``revision``, ``allow_download``). An empty rewrite keeps
    the original question (never an empty question); returns (rewrites, number kept)."""
    if name not in SENTENCE_PERTURBATIONS:
        raise KeyError(f"unknown sentence perturbation {name!r}; known: {SENTENCE_PERTURBATIONS}")
    common = {k: settings[k] for k in ("max_new_tokens", "batch_size", "device",
                                       "allow_download") if k in settings}  # fmt: skip
    first = Rewriter(settings["model"], settings.get("prompt", DEFAULT_PROMPT),
                     revision=settings.get("revision"), name=name, **common)  # fmt: skip
    out = first(questions)
    if name == "back_translation":
        if "back_model" not in settings:
            raise ValueError("back_translation needs back_model (the pivot language -> English)")
        back = Rewriter(settings["back_model"], settings.get("back_prompt", DEFAULT_PROMPT),
                        revision=settings.get("back_revision"), name=name, **common)  # fmt: skip
        out = back(out)
    empty = [i for i, q in enumerate(out) if not q]
    if empty:
        log.warning("%s: %d of %d rewrites came back empty; those questions stay as they were",
                    name, len(empty), len(out))  # fmt: skip
    return [q or original for q, original in zip(out, questions, strict=True)], len(empty)

"""Sentence-level question rewrites (formal, casual, passive, active, back-translation)
through configured Hugging Face text-to-text models.

Each is a ``text`` perturbation with one level (severity 1): the whole question is
rewritten, greedily (deterministic, so no seed), or with ``sampling`` (top-k and top-p, as
Styleformer; seeded per question and draw, so that the fidelity filter can redraw it).
``back_translation`` runs two models:
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
    ``AutoModelForSeq2SeqLM`` and its greedy output, or a sample once
    :meth:`with_sampling` is given ``top_k`` and ``top_p``, is the rewrite."""

    sampling: dict[str, Any] | None = None

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

    def with_sampling(self, sampling: Mapping[str, Any] | None) -> Rewriter:
        """This rewriter, sampling with ``sampling`` (``top_k``, ``top_p``; the config's
        defaults are filled in by its validation), or greedy with None."""
        self.sampling = None if sampling is None else dict(sampling)
        return self

    def __call__(self, questions: Sequence[str], seeds: Sequence[int] | None = None) -> list[str]:
        """The rewrites of ``questions``, in order: greedy, or sampled with one seed per
        question (``seeds``) when the rewriter samples."""
        import torch

        if self.sampling is not None:
            if seeds is None or len(seeds) != len(questions):
                raise ValueError("a sampled rewrite needs one seed per question")
            # One question per call: generate() draws from torch's generator, which can
            # only be seeded per call, and a question's draw must not depend on its batch.
            out = []
            for question, seed in zip(questions, seeds, strict=True):
                torch.manual_seed(seed)
                inputs = self.tokenizer(
                    [self.prompt.format(question=question)], return_tensors="pt", truncation=True
                )
                inputs.pop("token_type_ids", None)
                with torch.inference_mode():
                    ids = self.model.generate(
                        **inputs.to(self.device),
                        max_new_tokens=self.max_new_tokens,
                        do_sample=True,
                        **self.sampling,
                    )
                out.append(self.tokenizer.decode(ids[0], skip_special_tokens=True).strip())
            return out
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


class SentenceRewrite:
    """The models of one sentence-level perturbation ``name``, loaded once, from
    ``settings`` (``model``, and for back-translation ``back_model``;
    ``prompt``/``back_prompt``, ``max_new_tokens``, ``batch_size``, ``device``,
    ``revision``, ``allow_download``, ``sampling``)."""

    def __init__(self, name: str, settings: Mapping[str, Any]) -> None:
        if name not in SENTENCE_PERTURBATIONS:
            raise KeyError(
                f"unknown sentence perturbation {name!r}; known: {SENTENCE_PERTURBATIONS}"
            )
        keys = ("max_new_tokens", "batch_size", "device", "allow_download")
        common = {k: settings[k] for k in keys if k in settings}
        sampling = settings.get("sampling")
        self.name = name
        self.samples = settings.get("sampling") is not None
        first = settings.get("prompt", DEFAULT_PROMPT)
        self.stages = [
            Rewriter(
                settings["model"], first, revision=settings.get("revision"), name=name, **common
            ).with_sampling(sampling)
        ]
        if name == "back_translation":
            if "back_model" not in settings:
                raise ValueError(
                    "back_translation needs back_model (the pivot language -> English)"
                )
            self.stages.append(
                Rewriter(
                    settings["back_model"],
                    settings.get("back_prompt", DEFAULT_PROMPT),
                    revision=settings.get("back_revision"),
                    name=name,
                    **common,
                ).with_sampling(sampling)
            )

    def draw(self, questions: Sequence[str], seeds: Sequence[int] | None = None) -> list[str]:
        """The models' rewrites of ``questions`` as they come, empty ones included
        (sampled with ``seeds``, one per question, when the rewrite samples)."""
        out = list(questions)
        for stage, rewriter in enumerate(self.stages):
            # Each stage draws from its own seed, derived from the question's.
            stage_seeds = None if seeds is None else [s + stage for s in seeds]
            out = rewriter(out, stage_seeds if rewriter.sampling is not None else None)
        return out

    def __call__(
        self, questions: Sequence[str], seeds: Sequence[int] | None = None
    ) -> tuple[list[str], int]:
        """Rewrite ``questions`` (:meth:`draw`). An empty rewrite keeps the original
        question (never an empty question); returns (rewrites, number kept)."""
        return keep_originals(self.draw(questions, seeds), questions, self.name)


def keep_originals(
    rewrites: Sequence[str | None], questions: Sequence[str], name: str
) -> tuple[list[str | None], int]:
    """``rewrites`` with each empty one replaced by its original question (a question
    the fidelity filter dropped, None, stays None), logged; (rewrites, number kept)."""
    out = list(rewrites)
    empty = [i for i, q in enumerate(out) if q == ""]
    if empty:
        log.warning(
            "%s: %d of %d rewrites came back empty; those questions stay as they were",
            name,
            len(empty),
            len(out),
        )
    return [original if q == "" else q for q, original in zip(out, questions, strict=True)], len(
        empty
    )


def rewrite(
    questions: Sequence[str], name: str, settings: Mapping[str, Any]
) -> tuple[list[str], int]:
    """Rewrite ``questions`` greedily with the models of ``settings`` (see
    :class:`SentenceRewrite`); returns (rewrites, number of empty rewrites kept as the
    original)."""
    return SentenceRewrite(name, settings)(questions)

"""Adapter for LXMERT (``LxmertForQuestionAnswering``): a region-feature model.

LXMERT reads no pixels: each request is a :class:`~vqarobust.features.table.RegionFeatures`
(one feature row and one normalized box per object, from the model entry's feature
source) and a question. Weights load with ``from_pretrained`` from a local folder or a
cached Hub id (``unc-nlp/lxmert-gqa-uncased``, ``unc-nlp/lxmert-vqa-uncased``); no
remote code runs. The answer vocabulary comes from the entry's ``answers`` file, else
the checkpoint's ``answers.json`` (what the workflow's training writes), else the
config's ``id2label`` when it names every answer; the Hub's LXMERT configs do not, so
they need the file (LXMERT's ``trainval_label2ans.json`` for VQA, the GQA one for GQA).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

import torch
from transformers import AutoTokenizer, LxmertForQuestionAnswering

from vqarobust.features.table import RegionFeatures
from vqarobust.models.hf import HFVQAModel
from vqarobust.models.loading import safetensors_option
from vqarobust.models.replies import Reply, argmax_labels

ANSWERS_FILE = "answers.json"
_DEFAULT_LABEL = re.compile(r"LABEL_\d+")


def read_answers(path: str | os.PathLike[str]) -> list[str]:
    """An answer vocabulary file: a JSON list (index -> answer), or an object mapping
    answers to indices (``ans2label``) or indices to answers."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, list) and all(isinstance(a, str) for a in data):
        return data
    if isinstance(data, dict) and data:
        if all(isinstance(v, int) for v in data.values()):
            pairs = sorted((v, k) for k, v in data.items())
        elif all(str(k).isdigit() for k in data):
            pairs = sorted((int(k), v) for k, v in data.items())
        else:
            pairs = []
        if pairs and [i for i, _ in pairs] == list(range(len(pairs))):
            return [a for _, a in pairs]
    raise ValueError(
        f"{path}: an answer vocabulary is a JSON list of answers or an object of "
        "answer -> index (or index -> answer) with indices 0..n-1"
    )


def answer_vocabulary(config: Any, local: str, answers: str | None) -> list[str]:
    """The answers of the classifier's outputs (see the module's docstring)."""
    n = int(config.num_qa_labels)
    if answers is not None:
        vocab, where = read_answers(answers), answers
    elif os.path.isfile(os.path.join(local, ANSWERS_FILE)):
        where = os.path.join(local, ANSWERS_FILE)
        vocab = read_answers(where)
    else:
        labels = {int(k): v for k, v in (config.id2label or {}).items()}
        if len(labels) != n or any(_DEFAULT_LABEL.fullmatch(v) for v in labels.values()):
            raise ValueError(
                f"{local}: no answer vocabulary: the config's id2label does not name the "
                f"{n} answers and there is no {ANSWERS_FILE}; give the model entry's "
                "`answers` (a JSON list, or LXMERT's label2ans file)"
            )
        return [labels[i] for i in range(n)]
    if len(vocab) != n:
        raise ValueError(f"{where}: {len(vocab)} answers, but the model has {n} outputs")
    return vocab


class LxmertVQA(HFVQAModel):
    """LXMERT answering over region features; argmax over the answer vocabulary."""

    takes_features = True
    model_class = LxmertForQuestionAnswering

    def __init__(
        self,
        path_or_id: str,
        answers: str | None = None,
        max_length: int = 20,
        **options: Any,
    ) -> None:
        """``answers`` names the answer vocabulary's file, ``max_length`` the question's
        token limit; ``options`` are :class:`HFVQAModel`'s (name, batch size, device,
        dtype, downloads, revision)."""
        if options.get("trust_remote_code"):
            name = options.get("name", "model")
            raise ValueError(f"model {name!r}: LXMERT loads weights only (trust_remote_code)")
        self.answers_file, self.max_length = answers, max_length
        super().__init__(path_or_id, **options)

    def load(self, local: str, trust_remote_code: bool) -> None:
        """The tokenizer (LXMERT has no processor), the model and its answers."""
        self.tokenizer = AutoTokenizer.from_pretrained(local)
        self.model = self.model_class.from_pretrained(
            local, dtype=self.dtype, use_safetensors=safetensors_option(self.use_safetensors)
        )
        self.model.to(self.device).eval()
        self.answers = answer_vocabulary(self.model.config, local, self.answers_file)

    def truncated(self, questions: Sequence[str]) -> list[bool]:
        """Questions longer than ``max_length`` tokens (special tokens included)."""
        ids = self.tokenizer(list(questions), truncation=False, verbose=False)["input_ids"]
        return [len(x) > self.max_length for x in ids]

    @torch.inference_mode()
    def answer(
        self, images: Sequence[RegionFeatures], questions: Sequence[str]
    ) -> list[str | Reply]:
        """Argmax answers for one batch of (region features, question)."""
        return argmax_labels(self.scores(images, questions), self.answers)

    def scores(self, inputs: Sequence[RegionFeatures], questions: Sequence[str]) -> torch.Tensor:
        """The answer scores (batch, answers)."""
        feats, pos, mask = batch_regions(inputs, int(self.model.config.visual_feat_dim))
        text = self.tokenizer(
            list(questions),
            padding="longest",
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        out = self.model(
            input_ids=text["input_ids"].to(self.device),
            attention_mask=text["attention_mask"].to(self.device),
            token_type_ids=text["token_type_ids"].to(self.device),
            visual_feats=feats.to(self.device, self.dtype),
            visual_pos=pos.to(self.device, self.dtype),
            visual_attention_mask=mask.to(self.device),
        )
        return out.question_answering_score.float()


def batch_regions(
    inputs: Sequence[RegionFeatures], dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features (batch, objects, dim), boxes (batch, objects, 4) and a mask, padded to
    the batch's most objects; a feature dimension other than the model's is an error."""
    if not inputs:
        raise ValueError("no requests")
    foreign = sorted({type(r).__name__ for r in inputs if not isinstance(r, RegionFeatures)})
    if foreign:
        raise TypeError(
            f"LXMERT answers over region features, not {foreign}: give the model "
            "entry a feature source (features)"
        )
    wrong = sorted({r.features.shape[1] for r in inputs} - {dim})
    if wrong:
        raise ValueError(
            f"LXMERT takes region features of dimension {dim} (visual_feat_dim), got {wrong}: "
            "does the model entry's feature source match the checkpoint?"
        )
    n = max(len(r.features) for r in inputs)
    feats = torch.zeros(len(inputs), n, dim)
    pos = torch.zeros(len(inputs), n, 4)
    mask = torch.zeros(len(inputs), n, dtype=torch.long)
    for i, r in enumerate(inputs):
        m = len(r.features)
        feats[i, :m] = torch.from_numpy(r.features)
        pos[i, :m] = torch.from_numpy(r.boxes)
        mask[i, :m] = 1
    return feats, pos, mask

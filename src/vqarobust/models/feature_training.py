"""Train a region-feature model (tiny LXMERT) on a split's feature table, plain or with
SwapMix at the feature level, and save it in Hugging Face format.

SwapMix training (the paper's augmentation): in every step, each context object of each
question is swapped with probability ``p_object``, by one of its ``k`` class swaps with
probability ``p_class``, else by one of its ``k`` attribute swaps
(:mod:`vqarobust.context.feature_swaps`, on the training split's own feature bank).
Draws come from (seed, step, question id), so a run is reproducible whatever the order.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vqarobust import store
from vqarobust.context.feature_swaps import FeatureSwap, FeatureSwapPlanner
from vqarobust.features.table import FeatureTable
from vqarobust.features.word_vectors import word_vectors
from vqarobust.metrics.vqa_accuracy import most_common_answer
from vqarobust.models.architectures import build_architecture
from vqarobust.models.lxmert import ANSWERS_FILE
from vqarobust.models.recipe import Recipe
from vqarobust.models.vocab import build_tokenizer
from vqarobust.seeding import item_rng

log = logging.getLogger(__name__)


class FeatureSwapMix:
    """Per-step feature swaps of training questions' context objects."""

    def __init__(
        self,
        planner: FeatureSwapPlanner,
        contexts: list,
        seed: int,
        p_object: float = 0.5,
        p_class: float = 0.5,
    ) -> None:
        self.seed, self.p_object, self.p_class = seed, p_object, p_class
        self.bank = planner.bank
        # Per question, per context object: its class and attribute swaps.
        self.options: dict[int, list[tuple[list[FeatureSwap], list[FeatureSwap]]]] = {}
        for q in contexts:
            per_object = []
            for sw_index in sorted(set(q.context))[: planner.max_objects]:
                row = self.bank.row(q.image_id, sw_index)
                per_object.append((planner.class_swaps(q, row), planner.attribute_swaps(q, row)))
            self.options[q.question_id] = per_object
        if planner.skipped_class_swaps:
            log.info(
                "SwapMix: %d class swaps left out: every object of the new class carries "
                "an attribute its question names",
                planner.skipped_class_swaps,
            )
        self.swapped = 0  # object rows changed so far, for the log

    def swaps(self, step: int, question_id: int) -> list[FeatureSwap]:
        """The swaps made to this question's objects in this step."""
        rng = item_rng(self.seed, "swapmix-train", step, question_id)
        out = []
        for class_swaps, attribute_swaps in self.options[question_id]:
            if rng.random() >= self.p_object:
                continue
            options = class_swaps if rng.random() < self.p_class else attribute_swaps
            if options:
                out.append(options[int(rng.integers(len(options)))])
        return out

    def apply(self, step: int, question_ids: list[int], feats: torch.Tensor) -> torch.Tensor:
        """``feats`` (batch, objects, dim) with this step's swaps made (a copy)."""
        out = feats.clone()
        for i, qid in enumerate(question_ids):
            for sw in self.swaps(step, qid):
                if sw.donor is not None:
                    value = self.bank.matrix[self.bank.row(*sw.donor)]
                else:
                    value = self.bank.encode_labels(sw.after_class, sw.after_attributes)
                out[i, sw.object_index] = torch.from_numpy(np.asarray(value))
                self.swapped += 1
        return out


def padded_features(bank: FeatureTable, image_ids: list[int]) -> tuple[torch.Tensor, ...]:
    """Features, boxes and a mask of the given images, padded to the most objects."""
    n = max(bank.rows[i][1] - bank.rows[i][0] for i in image_ids)
    feats = torch.zeros(len(image_ids), n, bank.dim)
    pos = torch.zeros(len(image_ids), n, 4)
    mask = torch.zeros(len(image_ids), n, dtype=torch.long)
    for j, image_id in enumerate(image_ids):
        start, end = bank.rows[image_id]
        feats[j, : end - start] = torch.from_numpy(bank.matrix[start:end])
        pos[j, : end - start] = torch.from_numpy(bank.boxes[start:end])
        mask[j, : end - start] = 1
    return feats, pos, mask


def train_feature_model(
    questions_path: str,
    features_path: str,
    out_dir: str | os.PathLike[str],
    recipe: Recipe,
    name: str | None = None,
    word_vectors_path: str | None = None,
) -> dict[str, float]:
    """Train ``recipe.architecture`` (LXMERT) on the questions of a split and its feature
    table; save model, tokenizer and answer vocabulary (``answers.json``) to ``out_dir``.

    ``recipe.swapmix`` (``p_object``, ``p_class``, ``k``; scenes) trains with feature-level
    SwapMix (``recipe.swap_mode``: donor rows, or perfect sight's label re-encoding, which
    reads ``word_vectors_path``; ``recipe.threshold``: the class similarity threshold of
    the swaps). Returns training statistics (steps, seconds, training accuracy over the
    last 10% of steps, swapped rows)."""
    architecture, seed, batch_size, epochs = (
        recipe.architecture,
        recipe.seed,
        recipe.batch_size,
        recipe.epochs,
    )
    learning_rate = recipe.learning_rate
    name = name or architecture
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, recipe.threads))
    questions = store.read_questions(questions_path)
    bank = FeatureTable.read(features_path)
    data = _feature_tensors(questions, bank, features_path)
    feats, pos, mask, enc = data.feats, data.pos, data.mask, data.enc
    q_image, y = data.q_image, data.y
    model = build_architecture(
        architecture,
        recipe.options,
        vocab_size=data.tokenizer.vocab_size,
        labels=data.labels,
        visual_feat_dim=bank.dim,
    )
    model.train()
    # The clock includes planning SwapMix's swaps: part of what SwapMix training costs.
    t0 = time.perf_counter()
    augment = None
    if recipe.swapmix:
        augment = _feature_swapmix(bank, questions, recipe, word_vectors_path)
    qids = questions.column("question_id").to_pylist()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=learning_rate, weight_decay=recipe.weight_decay
    )
    steps = max(1, int(round(epochs * len(y) / batch_size)))
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=learning_rate, total_steps=steps, pct_start=0.1
    )
    gen = torch.Generator().manual_seed(seed)
    order, position = torch.randperm(len(y), generator=gen), 0
    correct = seen = 0
    every = max(1, steps // 20)
    n_epochs = max(1, math.ceil(epochs))
    for step in range(steps):
        if position + batch_size > len(order):
            order, position = torch.randperm(len(y), generator=gen), 0
        idx = order[position : position + batch_size]
        position += batch_size
        vf = feats[q_image[idx]]
        if augment is not None:
            vf = augment.apply(step, [qids[i] for i in idx.tolist()], vf)
        at = q_image[idx]
        out = model(
            input_ids=enc["input_ids"][idx],
            attention_mask=enc["attention_mask"][idx],
            token_type_ids=enc["token_type_ids"][idx],
            visual_feats=vf,
            visual_pos=pos[at],
            visual_attention_mask=mask[at],
        )
        logits = out.question_answering_score
        loss = torch.nn.functional.cross_entropy(logits, y[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step >= steps * 0.9:
            correct += int((logits.argmax(-1) == y[idx]).sum())
            seen += len(idx)
        if (step + 1) % every == 0 or step + 1 == steps:
            epoch = min(n_epochs, step * batch_size // len(y) + 1)
            log.info(
                "%s epoch %d/%d step %d/%d loss %.4f (%.0fs)",
                name,
                epoch,
                n_epochs,
                step + 1,
                steps,
                loss.item(),
                time.perf_counter() - t0,
            )
    seconds = time.perf_counter() - t0
    stats = {
        "steps": steps,
        "seconds": seconds,
        "train_accuracy": correct / max(seen, 1),
        "swapped_rows": augment.swapped if augment else 0,
    }
    if augment is not None:
        log.info("%s: SwapMix swapped %d object rows in training", name, augment.swapped)
    model.eval()
    with store.atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp)
        data.tokenizer.save_pretrained(tmp)
        (tmp / ANSWERS_FILE).write_text(json.dumps(data.labels))
        (tmp / "training.json").write_text(json.dumps(stats, indent=1))
    log.info("trained %s (%s): %s", name, architecture, stats)
    return stats


@dataclass
class _FeatureData:
    """A training split as tensors: each image's padded object features, each question
    with its image's row and its label."""

    labels: list[str]
    y: torch.Tensor
    feats: torch.Tensor
    pos: torch.Tensor
    mask: torch.Tensor
    enc: Any
    q_image: torch.Tensor
    tokenizer: Any


def _feature_tensors(questions: Any, bank: FeatureTable, features_path: str) -> _FeatureData:
    """The split's tensors and its word-level tokenizer; an image without features is an
    error naming the table."""
    texts = questions.column("question").to_pylist()
    targets = [most_common_answer(a) for a in questions.column("answers").to_pylist()]
    labels = sorted(set(targets))
    q_images = questions.column("image_id").to_pylist()
    missing = sorted({i for i in q_images if i not in bank})
    if missing:
        raise ValueError(
            f"{features_path}: no features of {len(missing)} training images, e.g. {missing[:5]}"
        )
    image_ids = sorted(set(q_images))
    row_of = {img: i for i, img in enumerate(image_ids)}
    feats, pos, mask = padded_features(bank, image_ids)
    tokenizer = build_tokenizer(texts)
    enc = tokenizer(texts, padding="longest", return_tensors="pt")
    q_image = torch.tensor([row_of[i] for i in q_images])
    label_ids = {a: i for i, a in enumerate(labels)}
    y = torch.tensor([label_ids[a] for a in targets])
    return _FeatureData(labels, y, feats, pos, mask, enc, q_image, tokenizer)


def _feature_swapmix(
    bank: FeatureTable,
    questions: Any,
    recipe: Recipe,
    word_vectors_path: str | None,
) -> FeatureSwapMix:
    """Feature-level SwapMix over the split's scenes (``recipe``: its ``swapmix``
    settings, seed, swap mode, threshold, class attributes, scene seed and split)."""
    from vqarobust.materialize.feature_context import scenes_contexts

    settings = {"p_object": 0.5, "p_class": 0.5, "k": 3, **recipe.swapmix}
    classes = sorted({c for c in bank.classes if c is not None})
    planner = FeatureSwapPlanner(
        bank,
        word_vectors(classes, word_vectors_path),
        settings["k"],
        recipe.seed,
        recipe.swap_mode,
        recipe.threshold,
        class_attributes=recipe.class_attributes,
        attribute_swaps=recipe.attribute_swaps,
    )
    contexts = scenes_contexts(questions, recipe.scene_seed, recipe.split)
    return FeatureSwapMix(planner, contexts, recipe.seed, settings["p_object"], settings["p_class"])

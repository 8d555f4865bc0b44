"""Train the small reference models on a prepared dataset split and save them in HF format.

Two architectures: a tiny ``ViltForQuestionAnswering`` and the late-fusion CNN + BoW
model. Both use a word-level tokenizer built from the training questions and a ViLT
image processor sized to the training images, saved next to the weights so that
``AutoProcessor`` / ``AutoModelForVisualQuestionAnswering`` load them like any Hub
checkpoint. Training is seeded and single-process, so it is reproducible.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image
from transformers import ViltProcessor
from transformers.models.vilt import ViltImageProcessorPil

from vqarobust import store
from vqarobust.metrics.vqa_accuracy import most_common_answer
from vqarobust.models.architectures import build_architecture
from vqarobust.models.recipe import Recipe
from vqarobust.models.vocab import build_tokenizer

log = logging.getLogger(__name__)


def _load_split(questions_path: str, images_dir: str) -> tuple[Any, dict[int, Image.Image]]:
    questions = store.read_questions(questions_path)
    images = {
        row["image_id"]: Image.fromarray(store.decode_image(row["bytes"]))
        for row in store.iter_images(images_dir)
    }
    return questions, images


def train_reference_model(
    questions_path: str,
    images_dir: str,
    out_dir: str | os.PathLike[str],
    recipe: Recipe,
    name: str | None = None,
) -> dict[str, float]:
    """Train ``recipe.architecture`` on a prepared split; save model + processor to
    ``out_dir``.

    Progress is logged about every 5% of the steps, as ``<name> epoch e/E step s/S loss
    L`` (``name`` defaults to the architecture). Returns training statistics (steps,
    seconds, final training accuracy over the last 10% of steps).

    ``recipe.swapmix`` (scenes datasets only: ``p_object``, ``p_class``, ``k``) trains with
    SwapMix augmentation: in every step each context object of each question is swapped
    with probability ``p_object``, by a class swap (one of its ``k`` nearest classes the
    question does not mention) with probability ``p_class``, else by an attribute swap;
    the scene is re-rendered. Draws are seeded by (seed, step, question id). The scenes
    are regenerated from ``recipe.scene_seed`` and ``recipe.split``.
    """
    if not recipe.feature_settings_unset():
        raise ValueError(
            "swap_mode, threshold and class_attributes apply to models on region "
            f"features only, not to {recipe.architecture} on pixels"
        )
    name = name or recipe.architecture
    seed = recipe.seed
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, recipe.threads))
    data = _tensors(*_load_split(questions_path, images_dir))
    model = build_architecture(
        recipe.architecture,
        recipe.options,
        vocab_size=data.tokenizer.vocab_size,
        labels=data.labels,
        image_size=data.image_size,
    )
    model.train()
    reuses_images = bool(getattr(model, "image_features_shared", False))
    augment = None
    if recipe.swapmix:
        from vqarobust.context.augment import SwapMixAugmenter

        augment = SwapMixAugmenter(
            data.question_ids,
            data.image_ids,
            recipe.scene_seed,
            recipe.split,
            seed,
            **recipe.swapmix,
        )
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    loop = _Loop(model, data, recipe, gen, t0, augment, reuses_images)
    steps = 0
    if recipe.pretrain:
        # A curriculum: first only the questions whose answer is one of ``answers``, the
        # skill the full mix leaves at chance (docs/models.md, "Reference checkpoints").
        if reuses_images or augment is not None:
            raise ValueError("train.pretrain takes models on random questions without SwapMix")
        wanted = {data.labels.index(a) for a in recipe.pretrain["answers"] if a in data.labels}
        missing = sorted(set(recipe.pretrain["answers"]) - set(data.labels))
        if missing:
            raise ValueError(f"train.pretrain.answers: no training question has answer {missing}")
        pool = torch.nonzero(torch.isin(data.y, torch.tensor(sorted(wanted)))).flatten()
        log.info(
            "%s: pretraining on the %d questions answered %s",
            name,
            len(pool),
            ", ".join(recipe.pretrain["answers"]),
        )
        steps += _fit(loop, pool, recipe.pretrain["epochs"], f"{name} pretrain")[0]
    pool = torch.arange(len(data.image_ids) if reuses_images else len(data.y))
    fitted, correct, seen = _fit(loop, pool, recipe.epochs, name)
    steps += fitted
    seconds = time.perf_counter() - t0
    if augment is not None:
        log.info("%s: SwapMix re-rendered %d training images with swaps", name, augment.swapped)
    model.eval()
    with store.atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp)
        data.processor.save_pretrained(tmp)
    stats = {"steps": steps, "seconds": seconds, "train_accuracy": correct / max(seen, 1)}
    log.info("trained %s (%s): %s", name, recipe.architecture, stats)
    return stats


@dataclass
class _Loop:
    """What every phase of one training shares: the model, its data and recipe, the
    generator of the question order, the start time, SwapMix and the batching mode."""

    model: Any
    data: _Data
    recipe: Recipe
    gen: torch.Generator
    t0: float
    augment: Any
    reuses_images: bool


def _fit(loop: _Loop, pool: torch.Tensor, epochs: float, name: str) -> tuple[int, int, int]:
    """Train for ``epochs`` over the units of ``pool`` (question or, for a late-fusion
    model, image rows) with a fresh AdamW and one-cycle schedule; returns the steps, and
    the questions answered right and seen over the last 10% of them."""
    model, data, recipe, gen, augment = loop.model, loop.data, loop.recipe, loop.gen, loop.augment
    reuses_images, t0 = loop.reuses_images, loop.t0
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay
    )
    # A late-fusion model takes whole images with all of their questions per step, so it
    # encodes each image once; other models take random questions (more varied batches,
    # and batch norm statistics over many images).
    units = len(pool)
    per_step = (
        max(1, round(recipe.batch_size * len(data.image_ids) / len(data.y)))
        if (reuses_images)
        else recipe.batch_size
    )
    steps = max(1, int(round(epochs * units / per_step)))
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=recipe.learning_rate, total_steps=steps, pct_start=0.1
    )
    order = pool[torch.randperm(units, generator=gen)]
    pos, correct, seen = 0, 0, 0
    every = max(1, steps // 20)
    n_epochs = max(1, math.ceil(epochs))
    for step in range(steps):
        if pos + per_step > len(order):
            order, pos = pool[torch.randperm(units, generator=gen)], 0
        chosen = order[pos : pos + per_step]
        pos += per_step
        idx, inputs = data.batch(chosen, reuses_images)
        if augment is not None:
            # Each question sees its own swapped scene (or the clean one).
            pv = augment.pixels(
                step, idx.tolist(), data.pixels[data.q_image[idx]], data.image_processor
            )
            inputs["pixel_values"] = pv
            inputs["pixel_mask"] = torch.ones(
                pv.shape[0], pv.shape[2], pv.shape[3], dtype=torch.long
            )
            if reuses_images:
                inputs["image_index"] = torch.arange(len(idx))
        out = model(**inputs)
        loss = torch.nn.functional.cross_entropy(out.logits, data.y[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step >= steps * 0.9:
            correct += int((out.logits.argmax(-1) == data.y[idx]).sum())
            seen += len(idx)
        if (step + 1) % every == 0 or step + 1 == steps:
            epoch = min(n_epochs, step * per_step // units + 1)
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
    return steps, correct, seen


@dataclass
class _Data:
    """A training split as tensors: every image once, every question with its image's
    row and its label."""

    labels: list[str]
    y: torch.Tensor
    question_ids: list[int]
    image_ids: list[int]
    image_size: int
    pixels: torch.Tensor
    enc: Any
    q_image: torch.Tensor
    tokenizer: Any
    image_processor: Any
    processor: Any

    def batch(self, chosen: torch.Tensor, per_image: bool) -> tuple[torch.Tensor, dict]:
        """The questions of one step (``chosen`` images with all their questions, or
        ``chosen`` questions) and the model's inputs for them."""
        if per_image:
            questions_of = [torch.nonzero(self.q_image == i).flatten() for i in chosen.tolist()]
            idx = torch.cat(questions_of)
            sizes = torch.tensor([len(q) for q in questions_of])
            pv = self.pixels[chosen]
            extra = {"image_index": torch.repeat_interleave(torch.arange(len(sizes)), sizes)}
        else:
            idx = chosen
            pv, extra = self.pixels[self.q_image[idx]], {}
        inputs = {
            "input_ids": self.enc["input_ids"][idx],
            "attention_mask": self.enc["attention_mask"][idx],
            "token_type_ids": self.enc["token_type_ids"][idx],
            "pixel_values": pv,
            "pixel_mask": torch.ones(pv.shape[0], pv.shape[2], pv.shape[3], dtype=torch.long),
            **extra,
        }
        return idx, inputs


def _tensors(questions: Any, images: dict[int, Image.Image]) -> _Data:
    """The split's tensors, its word-level tokenizer and the image processor sized to
    its images."""
    texts = questions.column("question").to_pylist()
    # The training target is each question's most common answer (easy-VQA has one).
    targets = [most_common_answer(a) for a in questions.column("answers").to_pylist()]
    labels = sorted(set(targets))
    label_ids = {a: i for i, a in enumerate(labels)}
    sizes = {im.size for im in images.values()}
    if len(sizes) != 1:
        # Padding mixed sizes would feed padding to the model as image content.
        raise ValueError(f"training expects images of one size, found {sorted(sizes)[:5]}")
    image_size = min(next(iter(sizes)))
    tokenizer = build_tokenizer(texts)
    # The PIL processor by name: "ViltImageProcessor" means the torchvision one, whose
    # resampling differs; the name saved with the checkpoint keeps its preprocessing
    # whether torchvision is installed or not (docs/install.md, "Notes on dependencies").
    image_processor = ViltImageProcessorPil(
        size={"shortest_edge": image_size}, size_divisor=8, do_pad=True
    )
    processor = ViltProcessor(image_processor=image_processor, tokenizer=tokenizer)
    image_ids = sorted(images)
    row_of = {img: i for i, img in enumerate(image_ids)}
    pixels = image_processor([images[i] for i in image_ids], return_tensors="pt")["pixel_values"]
    enc = tokenizer(texts, padding="longest", return_tensors="pt")
    q_image = torch.tensor([row_of[i] for i in questions.column("image_id").to_pylist()])
    y = torch.tensor([label_ids[a] for a in targets])
    return _Data(
        labels,
        y,
        questions.column("question_id").to_pylist(),
        image_ids,
        image_size,
        pixels,
        enc,
        q_image,
        tokenizer,
        image_processor,
        processor,
    )

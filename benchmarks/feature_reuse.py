"""Questions per second with and without sharing image features, on CPU.

    .venv/bin/python benchmarks/feature_reuse.py [--images 40] [--per-image 5]
        [--models blip paligemma2 qwen2-vl]

Builds tiny random-initialised checkpoints offline whose vision tower outweighs their
text side, as in the real models (a 4-layer, 128-wide vision tower on 224x224 images,
16- or 14-pixel patches; a 1-layer text side as wide as the tower for BLIP, a 2-layer,
32-wide one for the chat models), and answers ~5 questions
per image in questions' length order (as inference does), once encoding each distinct
image once per call and once encoding the image of every question. BLIP shares through
its own adapter; PaliGemma 2 (196 image tokens) and Qwen2-VL (dynamic resolution, 64
merged tokens) through the chat adapter's precomputed encoder outputs. Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tiny_checkpoints import tiny_blip  # noqa: E402
from tests.tiny_vlms import tiny_paligemma2, tiny_qwen2_vl  # noqa: E402
from vqarobust.models import load_model  # noqa: E402
from vqarobust.models.base import VQAModel  # noqa: E402

QUESTIONS = [
    "what color is the shape?",
    "is there a circle?",
    "how many dog?",
    "does the image contain a triangle?",
    "what is the shape?",
]
SIGLIP = {
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "image_size": 224,
    "patch_size": 16,
}
# (family, batch size, builder): BLIP at the 32 of this benchmark's earlier BLIP-only
# rows, the chat models at their family's default.
MODELS: dict[str, tuple[str, int, Callable[[Path], Path]]] = {
    "blip": ("blip", 32, lambda p: tiny_blip(p, SIGLIP)),
    "paligemma2": ("image-text-to-text", 8, lambda p: tiny_paligemma2(p, SIGLIP)),
    "qwen2-vl": (
        "image-text-to-text",
        8,
        lambda p: tiny_qwen2_vl(p, {"depth": 4, "embed_dim": 128, "num_heads": 4}, max_patches=256),
    ),
}


def rate(model: VQAModel, images: list[Image.Image], questions: list[str]) -> float:
    """Questions per second of one ``answer_all`` call, after a warm-up batch."""
    model.answer_all(images[: model.batch_size], questions[: model.batch_size])
    t0 = time.perf_counter()
    model.answer_all(images, questions)
    return len(questions) / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--per-image", type=int, default=5)
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    distinct = [
        Image.fromarray(rng.integers(0, 256, (224, 224, 3), dtype=np.uint8))
        for _ in range(args.images)
    ]
    images = [im for im in distinct for _ in range(args.per_image)]
    questions = [QUESTIONS[k % len(QUESTIONS)] for k in range(len(images))]
    print(f"{len(questions)} questions about {len(distinct)} images, CPU, 2 threads\n")
    print("| model | batch | questions/s, shared | questions/s, every request | ratio |")
    print("|---|---|---|---|---|")
    for name in args.models:
        family, batch, build = MODELS[name]
        with tempfile.TemporaryDirectory() as tmp:
            path = str(build(Path(tmp)))
            rates = {}
            for share in (True, False):
                model = load_model(
                    {
                        "family": family,
                        "path_or_id": path,
                        "batch_size": batch,
                        "max_new_tokens": 3,
                        "share_image_features": share,
                    },
                    name=name,
                )
                rates[share] = rate(model, images, questions)
        print(
            f"| {name} | {batch} | {rates[True]:.1f} | {rates[False]:.1f} | "
            f"{rates[True] / rates[False]:.1f}x |"
        )


if __name__ == "__main__":
    main()

"""Questions per second of the BLIP adapter with and without sharing image features.

    .venv/bin/python benchmarks/feature_reuse.py [n_images] [questions_per_image]

Builds a tiny random-initialised BLIP offline whose vision tower (224x224, 16x16 patches,
4 layers, hidden 128) outweighs its 1-layer text side, as in real BLIP, and answers
~5 questions per image on CPU, once encoding each distinct image once per batch and once
encoding the image of every question.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tiny_checkpoints import tiny_blip  # noqa: E402
from vqarobust.models import load_model  # noqa: E402


def main(n_images: int = 40, per_image: int = 5) -> None:
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (224, 224, 3), dtype=np.uint8))
              for _ in range(int(n_images))]  # fmt: skip
    qs = ["what color is the shape?", "is there a circle?", "how many dog?",
          "does the image contain a triangle?", "what is the shape?"]  # fmt: skip
    req_images = [im for im in images for _ in range(int(per_image))]
    req_questions = [qs[k % len(qs)] for k in range(len(req_images))]
    vision = {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
              "intermediate_size": 512, "image_size": 224, "patch_size": 16}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = str(tiny_blip(Path(tmp), vision))
        for share in (True, False):
            model = load_model({"family": "blip", "path_or_id": path, "batch_size": 32,
                                "max_new_tokens": 3, "share_image_features": share})  # fmt: skip
            model.answer_all(req_images[:8], req_questions[:8])  # warm-up
            t0 = time.perf_counter()
            model.answer_all(req_images, req_questions)
            dt = time.perf_counter() - t0
            print(f"share_image_features={share!s:5s} {len(req_questions) / dt:7.1f} questions/s "
                  f"({len(req_questions)} questions, {len(images)} images)")  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:])

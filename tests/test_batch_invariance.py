"""Batch size changes no answer (issue 44, item 4): the batch size stays out of the
resume fingerprint and reruns nothing (vqarobust.params) on this claim, so every family
that batches requests answers a batch of questions chosen to differ in length (one word
to fifteen, so most positions of the short ones are padding) exactly as it answers them
one at a time, in fp32 on the CPU. The classifier's logits are checked image by image in
tests/test_inference.py; BLIP against transformers' own one-request loop in
tests/test_generative_models.py."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tests.test_pnp_vqa import TINY
from tests.tiny_checkpoints import tiny_blip, tiny_llava, tiny_pnp, tiny_vle
from vqarobust.models import load_model

QUESTIONS = ["what", "is there a red circle in the image what color is the shape and how many",
             "how many dog?", "color?",
             "does the image contain a big red triangle on the left side of it"]  # fmt: skip


def _requests() -> tuple[list[Image.Image], list[str]]:
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8))
              for _ in range(3)]  # fmt: skip
    pairs = [(im, q) for im in images for q in QUESTIONS]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("batch")
    llava = str(tiny_llava(root / "llava"))
    return {
        "blip": {"family": "blip", "path_or_id": str(tiny_blip(root / "blip")),
                 "max_new_tokens": 4},
        "llava": {"family": "llava", "path_or_id": llava, "max_new_tokens": 4},
        "image-text-to-text": {"family": "image-text-to-text", "path_or_id": llava,
                               "max_new_tokens": 4},
        "vle": {"family": "vle", "path_or_id": str(tiny_vle(root / "vle"))},
        "pnp-vqa": {"family": "pnp-vqa", **tiny_pnp(root / "pnp"), "pnp": TINY},
    }  # fmt: skip


@pytest.mark.parametrize("family", ["blip", "llava", "image-text-to-text", "vle", "pnp-vqa"])
def test_a_batch_of_mixed_lengths_answers_like_one_request_at_a_time(specs, family):
    images, questions = _requests()
    batched = load_model({**specs[family], "batch_size": len(questions)})
    alone = load_model({**specs[family], "batch_size": 1})
    assert batched.answer_all(images, questions) == alone.answer_all(images, questions)

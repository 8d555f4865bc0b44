"""Batch size changes no answer (issue 44, item 4): the batch size stays out of the
resume fingerprint and reruns nothing (vqarobust.params) on this claim, so every family
that batches requests computes a batch of questions chosen to differ in length (one word
to fifteen, so most positions of the short ones are padding) as it computes them one at
a time, in fp32 on the CPU. Where a tiny random model's answers are nearly constant, what
is compared is the numbers the answer is taken from (logits, scores, relevance), which
would move with any leak of padding. The classifier's logits are checked image by image
in tests/test_inference.py; BLIP against transformers' own one-request loop, with a spy
on the decoder's mask, in tests/test_generative_models.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from tests.tiny_checkpoints import TINY_PNP, tiny_llava, tiny_lxmert, tiny_pnp, tiny_vle
from vqarobust.models import load_model

QUESTIONS = [
    "what",
    "is there a red circle in the image what color is the shape and how many",
    "how many dog?",
    "color?",
    "does the image contain a big red triangle on the left side of it",
]
CLOSE = {"atol": 1e-5, "rtol": 1e-4}  # fp32 reductions over other shapes: last-bit noise


def _requests() -> tuple[list[Image.Image], list[str]]:
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)) for _ in range(3)]
    pairs = [(im, q) for im in images for q in QUESTIONS]
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.mark.parametrize("family", ["llava", "image-text-to-text"])
def test_chat_families_generate_a_padded_batch_like_one_request(tmp_path, family):
    torch.manual_seed(1)  # weights whose replies differ between requests (5 distinct)
    spec = {
        "family": family,
        "path_or_id": str(tiny_llava(tmp_path / "llava")),
        "max_new_tokens": 6,
    }
    images, questions = _requests()
    batched = load_model({**spec, "batch_size": len(questions)}).answer_all(images, questions)
    assert len(set(batched)) > 1  # the comparison can fail: the replies differ
    assert batched == load_model({**spec, "batch_size": 1}).answer_all(images, questions)


def test_vle_logits_of_a_padded_batch_are_each_requests_alone(tmp_path):
    model = load_model(
        {"family": "vle", "path_or_id": str(tiny_vle(tmp_path / "vle")), "batch_size": 15}
    )
    logits: list[torch.Tensor] = []

    class Spy:
        """The VLE module, its logits kept."""

        def __init__(self, module: torch.nn.Module) -> None:
            self.module = module

        def __call__(self, *args, **kwargs):
            out = self.module(*args, **kwargs)
            logits.append(out.detach())
            return out

        def __getattr__(self, name: str):
            return getattr(self.module, name)

    model.model = Spy(model.model)
    images, questions = _requests()
    model.answer_all(images, questions)
    together = torch.cat(logits)
    logits.clear()
    model.batch_size = 1
    model.answer_all(images, questions)
    torch.testing.assert_close(together, torch.cat(logits), **CLOSE)


def test_pnp_relevance_of_a_padded_batch_is_each_requests_alone(tmp_path):
    """PNP-VQA's batched step: the GradCAM relevance of the patches to each question
    (its captions are seeded per item, tests/test_pnp_vqa.py)."""
    from vqarobust.models.pnp_vqa import normalize_question

    pnp = load_model({"family": "pnp-vqa", **tiny_pnp(tmp_path / "pnp"), "pnp": TINY_PNP})
    images, questions = _requests()
    embeds = torch.stack([f[0] for f in pnp._encode(images)])
    qs = [normalize_question(q) for q in questions]
    together = pnp.relevance(embeds, qs)
    alone = torch.cat([pnp.relevance(embeds[i : i + 1], qs[i : i + 1]) for i in range(len(qs))])
    torch.testing.assert_close(together, alone, **CLOSE)


def test_lxmert_scores_of_padded_regions_and_questions_are_each_requests_alone(tmp_path):
    """LXMERT batches region features as well: images of one to six objects, padded to
    the batch's most, beside questions of one to fifteen words."""
    from vqarobust.features.table import RegionFeatures

    model = load_model(
        {
            "family": "lxmert",
            "path_or_id": str(tiny_lxmert(tmp_path / "lx", dim=4)),
            "batch_size": 15,
        }
    )
    rng = np.random.default_rng(1)
    regions = [
        RegionFeatures(
            rng.normal(size=(n, 4)).astype(np.float32),
            rng.uniform(0, 1, size=(n, 4)).astype(np.float32),
        )
        for n in (1, 6, 3)
    ]
    inputs = [r for r in regions for _ in QUESTIONS]
    questions = QUESTIONS * len(regions)
    with torch.inference_mode():
        together = model.scores(inputs, questions)
        alone = torch.cat([model.scores([r], [q]) for r, q in zip(inputs, questions, strict=True)])
    torch.testing.assert_close(together, alone, **CLOSE)

"""PNP-VQA: GradCAM patch relevance, patch sampling, caption filtering, fusion-in-decoder
(hand-made tensors and the tiny T5), and the pipeline on tiny random checkpoints."""

from __future__ import annotations

import logging

import pytest
import torch
from PIL import Image

from tests.tiny_checkpoints import TINY_PNP, random_images, tiny_pnp
from vqarobust.models import load_model
from vqarobust.models.pnp_vqa import (
    enc_token_id,
    fid_encode,
    fid_generate,
    gradcam_relevance,
    item_seed,
    keep_new_captions,
    normalize_question,
    qa_contexts,
    sample_patches,
)


@pytest.fixture(scope="module")
def pnp_paths(tmp_path_factory):
    return tiny_pnp(tmp_path_factory.mktemp("pnp"))


@pytest.fixture(scope="module")
def pnp(pnp_paths):
    return load_model({"family": "pnp-vqa", **pnp_paths, "batch_size": 3, "pnp": TINY_PNP})


QUESTIONS = [
    "What color is the shape?",
    "is there a circle?",
    "how many dog",
    "does the image contain a red triangle?",
    "What shape is there?",
]


def test_gradcam_relevance_by_hand():
    # Tokens: [ENC] w1 w2 [SEP]; patches: image [CLS] (ignored), p1, p2; two heads.
    attention = torch.full((1, 2, 4, 3), 0.5)
    grads = torch.full((1, 2, 4, 3), 100.0)  # [ENC], [SEP] and the image [CLS] never count
    grads[0, 0, 1, 1:] = torch.tensor([1.0, -2.0])
    grads[0, 0, 2, 1:] = torch.tensor([2.0, 4.0])
    grads[0, 1, 1, 1:] = torch.tensor([3.0, 0.0])
    grads[0, 1, 2, 1:] = torch.tensor([-1.0, 4.0])
    # attention x positive gradient: head 0 -> w1 [0.5, 0], w2 [1, 2]; head 1 -> w1 [1.5, 0],
    # w2 [0, 2]. Mean over heads: w1 [1, 0], w2 [0.5, 2]. Mean over w1, w2: [0.75, 1.0].
    full = torch.tensor([[1, 1, 1, 1]])
    assert torch.allclose(gradcam_relevance(attention, grads, full), torch.tensor([[0.75, 1.0]]))
    # The same tensors for "[ENC] w1 [SEP] [PAD]": only w1 counts.
    both = gradcam_relevance(
        attention.repeat(2, 1, 1, 1),
        grads.repeat(2, 1, 1, 1),
        torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
    )
    assert torch.allclose(both, torch.tensor([[0.75, 1.0], [1.0, 0.0]]))
    # No question token between [ENC] and [SEP]: no division by zero.
    empty = gradcam_relevance(attention[:, :, :2], grads[:, :, :2], torch.tensor([[1, 1]]))
    assert torch.isfinite(empty).all()


def test_patches_are_drawn_by_relevance_and_zero_relevance_last():
    gen = torch.Generator().manual_seed(0)
    rel = torch.tensor([0.0, 5.0, 0.0, 3.0, 0.0])
    picks = sample_patches(rel, 200, 2, gen)
    assert picks.shape == (200, 2) and (picks == torch.tensor([1, 3])).all()
    picks = sample_patches(rel, 200, 3, gen)
    assert (picks[:, 1:] != picks[:, :-1]).all()  # distinct and sorted
    assert all({1, 3} <= set(row.tolist()) for row in picks)
    counts = torch.bincount(picks.flatten(), minlength=5)
    assert counts[0] > 30 and counts[2] > 30 and counts[4] > 30  # the third pick is uniform
    ones = sample_patches(torch.tensor([1.0, 3.0]), 4000, 1, torch.Generator().manual_seed(1))
    assert abs(ones.float().mean().item() - 0.75) < 0.03
    again = sample_patches(rel, 10, 3, torch.Generator().manual_seed(0))
    assert torch.equal(again, sample_patches(rel, 10, 3, torch.Generator().manual_seed(0)))
    with pytest.raises(ValueError, match="exceeds"):
        sample_patches(rel, 1, 6, gen)


def test_caption_filter_and_qa_contexts():
    kept = keep_new_captions([], ["a dog on grass", "a dog", "a cat", "", "a dog on grass"], 5)
    assert kept == ["a dog on grass", "a cat"]  # "a dog" is inside a kept caption
    assert keep_new_captions(kept, ["a red bus", "a tree"], 3) == [*kept, "a red bus"]
    assert qa_contexts("What Is It? ", ["A dog ", "a cat"]) == [
        "what is it? \\n a dog.",
        "what is it? \\n a cat.",
    ]
    assert qa_contexts("q", ["a", "b", "c"], per_context=2) == ["q \\n a. b.", "q \\n c."]


def test_question_normalisation_and_item_seed():
    assert normalize_question("What's the Color (of) this?!  ") == "what's the color of this?"
    assert normalize_question(" ".join(["w"] * 60)) == " ".join(["w"] * 50)
    black = Image.new("RGB", (4, 4))
    # Golden: a change here changes every PNP-VQA caption.
    assert item_seed(0, black, "what?") == 1576346380615775593
    assert item_seed(0, black, "what?") != item_seed(1, black, "what?")
    assert item_seed(0, black, "what?") != item_seed(0, black, "who?")
    assert item_seed(0, black, "what?") != item_seed(
        0, Image.new("RGB", (4, 4), (0, 0, 1)), "what?"
    )


def test_enc_token_follows_lavis(pnp_paths):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(pnp_paths["caption_model"])  # [DEC], no [ENC]
    assert "[ENC]" not in tok.get_vocab()
    assert enc_token_id(tok, len(tok) + 1) == tok.convert_tokens_to_ids("[DEC]") + 1
    with pytest.raises(ValueError, match="outside"):
        enc_token_id(tok, len(tok))
    assert enc_token_id(tok, len(tok), override=3) == 3
    itm = AutoTokenizer.from_pretrained(pnp_paths["itm_model"])
    assert enc_token_id(itm, len(itm)) == itm.convert_tokens_to_ids("[ENC]")


def test_fusion_in_decoder_encodes_each_context_alone(pnp_paths):
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(pnp_paths["qa_model"])
    t5 = T5ForConditionalGeneration.from_pretrained(pnp_paths["qa_model"]).eval()
    a, b, c = (
        "what color \\n a red circle.",
        "what color \\n a blue shape there.",
        "how many \\n 2 dog.",
    )
    with torch.no_grad():
        states, mask = fid_encode(t5, tok, [[a, b], [c]])
        alone = t5.get_encoder()(tok([a], return_tensors="pt")["input_ids"]).last_hidden_state[0]
        other, _ = fid_encode(t5, tok, [[a, c], [b]])
    length = states.shape[1] // 2
    assert mask[1, length:].sum() == 0  # the second question's missing context is masked
    n = alone.shape[0]
    assert torch.allclose(states[0, :n], alone, atol=1e-5)
    assert torch.allclose(other[0, :n], states[0, :n], atol=1e-5)  # b does not change a's states
    with torch.no_grad():
        # Cross-attention has no positions: the order of the contexts does not matter.
        assert fid_generate(t5, tok, [[a, b]]) == fid_generate(t5, tok, [[b, a]])
        # One context: plain T5 generation.
        enc = tok([c], return_tensors="pt")
        plain = t5.generate(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], max_length=20
        )
        assert fid_generate(t5, tok, [[c]]) == tok.batch_decode(plain, skip_special_tokens=True)
        # Batched questions with different context counts answer as alone.
        assert fid_generate(t5, tok, [[a, b], [c]]) == (
            fid_generate(t5, tok, [[a, b]]) + fid_generate(t5, tok, [[c]])
        )


def test_pipeline_answers_a_batch_seeded_per_item(pnp, pnp_paths):
    images, qs = random_images(5), QUESTIONS
    answers = pnp.answer_all(images, qs)
    assert len(answers) == 5 and all(isinstance(a, str) for a in answers)
    assert any(answers)
    # Per-item seeding: the same answers one at a time, in another order, after a reload.
    assert [pnp.answer([im], [q])[0] for im, q in zip(images, qs, strict=True)] == answers
    assert pnp.answer_all(images[::-1], qs[::-1]) == answers[::-1]
    again = load_model(
        {
            "family": "pnp-vqa",
            **pnp_paths,
            "batch_size": 2,
            "pnp": TINY_PNP,
            "share_image_features": False,
        }
    )
    assert again.answer_all(images, qs) == answers


def test_pipeline_stages(pnp):
    images = random_images(2)
    features = pnp._encode(images)
    qs = [normalize_question(q) for q in QUESTIONS[:2]]
    rel = pnp.relevance(torch.stack([f[0] for f in features]), qs)
    assert rel.shape == (2, 16) and (rel >= 0).all() and (rel.sum(1) > 0).all()
    caps = pnp.captions(features[0][1], rel[0], seed=7)
    assert 1 <= len(caps) <= 5 and caps == pnp.captions(features[0][1], rel[0], seed=7)
    assert caps != pnp.captions(features[0][1], rel[0], seed=8)
    assert all(not any(c in o for o in caps if o is not c) for c in caps)


def test_too_few_distinct_captions_is_logged(pnp_paths, caplog):
    m = load_model(
        {
            "family": "pnp-vqa",
            **pnp_paths,
            "pnp": {**TINY_PNP, "num_captions": 400, "max_caption_rounds": 1},
        }
    )
    with caplog.at_level(logging.WARNING):
        m.answer_all(random_images(1), ["what color?"])
    assert "1 of 1 questions got fewer than 400 distinct captions after 1 rounds" in caplog.text


def test_bad_settings_fail_with_the_name(pnp_paths):
    with pytest.raises(ValueError, match=r"unknown pnp settings \['num_captionz'\]"):
        load_model({"family": "pnp-vqa", **pnp_paths, "pnp": {"num_captionz": 3}})
    with pytest.raises(ValueError, match="block_num 5 is not a cross-attention block.*2 blocks"):
        load_model({"family": "pnp-vqa", **pnp_paths, "pnp": {"block_num": 5}})


def test_config_checks_the_pnp_entry():
    from vqarobust.config import ConfigError, validate_config

    def check(entry):
        cfg = {
            "dataset": {"name": "d", "adapter": "easy-vqa"},
            "corruptions": ["snow"],
            "models": {"m": entry},
        }
        return validate_config(cfg)["models"]["m"]

    full = {"family": "pnp-vqa", "itm_model": "a", "caption_model": "b", "qa_model": "c"}
    assert check({**full, "pnp": {"num_captions": 50}, "seed": 3})["device"] == "cuda"
    with pytest.raises(ConfigError, match=r"models.m: family pnp-vqa needs \['qa_model'\]"):
        check({k: v for k, v in full.items() if k != "qa_model"})
    with pytest.raises(ConfigError, match="models.m.path_or_id: family pnp-vqa reads"):
        check({**full, "path_or_id": "x"})
    with pytest.raises(ConfigError, match="models.m.pnp: applies to family pnp-vqa only, not blip"):
        check({"family": "blip", "path_or_id": "x", "pnp": {"num_captions": 5}})
    with pytest.raises(
        ConfigError, match="models.m.seed: applies to family openai-chat or pnp-vqa"
    ):
        check({"family": "blip", "path_or_id": "x", "seed": 1})
    with pytest.raises(ConfigError, match="num_captions"):
        check({**full, "pnp": {"num_captions": 0}})

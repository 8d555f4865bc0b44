"""Offline tests of the generative adapters on tiny random-initialised checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from tests.tiny_checkpoints import tiny_blip
from vqarobust.models import load_model


def _requests(n_images=3, per_image=3):
    rng = np.random.default_rng(0)
    images = [
        Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)) for _ in range(n_images)
    ]
    qs = ["what color is the shape?", "is there a circle?", "how many dog?"]
    return (
        [im for im in images for _ in range(per_image)],
        [qs[k % len(qs)] for k in range(n_images * per_image)],
    )


@pytest.fixture(scope="module")
def blip_path(tmp_path_factory):
    return tiny_blip(tmp_path_factory.mktemp("blip"))


def test_blip_answers_batches_like_single_requests(blip_path):
    model = load_model(
        {"family": "blip", "path_or_id": str(blip_path), "batch_size": 4, "max_new_tokens": 3}
    )
    images, questions = _requests()
    answers = model.answer_all(images, questions)
    assert len(answers) == len(questions) and all(isinstance(a, str) for a in answers)
    single = [model.answer([im], [q])[0] for im, q in zip(images, questions, strict=True)]
    assert answers == single


@pytest.fixture(scope="module")
def llava_path(tmp_path_factory):
    from tests.tiny_checkpoints import tiny_llava

    return tiny_llava(tmp_path_factory.mktemp("llava"))


@pytest.mark.parametrize("family", ["llava", "image-text-to-text"])
def test_chat_models_answer_with_left_padding(llava_path, family):
    model = load_model(
        {"family": family, "path_or_id": str(llava_path), "batch_size": 4, "max_new_tokens": 3}
    )
    assert model.processor.tokenizer.padding_side == "left"
    images, questions = _requests()
    answers = model.answer_all(images, questions)
    assert len(answers) == len(questions) and all(isinstance(a, str) for a in answers)
    # Left padding: a padded batch answers exactly like one request at a time.
    single = [model.answer([im], [q])[0] for im, q in zip(images, questions, strict=True)]
    assert answers == single


def test_blip_answers_what_transformers_generate_answers_one_request_at_a_time(blip_path):
    """Questions of very different lengths in one batch: the decoder must not read the
    padding of the short ones (transformers' own batched generate does)."""
    from tests.usual_loops import one_at_a_time

    images, _ = _requests()
    questions = ["what", "is there a red circle in the image what color is the shape"] * 3
    images = (images * 6)[: len(questions)]
    model = load_model(
        {"family": "blip", "path_or_id": str(blip_path), "batch_size": 6, "max_new_tokens": 5}
    )
    expected = one_at_a_time("blip", str(blip_path), images, questions, max_new_tokens=5)
    decoded = model.model.text_decoder.generate
    masks = []

    def spy(**kwargs):
        masks.append(kwargs["encoder_attention_mask"])
        return decoded(**kwargs)

    model.model.text_decoder.generate = spy
    assert model.answer_all(images, questions) == expected
    # The decoder never saw a padded question position (transformers' decoder reads
    # them whatever the mask says).
    assert len(masks) == 2 and all(bool(m.all()) for m in masks)


def test_chat_prompt_must_hold_the_question(llava_path):
    with pytest.raises(ValueError, match="prompt must contain"):
        load_model({"family": "llava", "path_or_id": str(llava_path), "prompt": "Answer!"})


def test_llava_shared_image_features_match_the_plain_path(llava_path, monkeypatch):
    """As every chat architecture's (tests/test_vlm_architectures.py): batches of 2 over 3
    images x 3 questions, so later batches reuse earlier ones' images."""
    from tests.tiny_vlms import check_shared_path

    spec = {"family": "llava", "path_or_id": str(llava_path), "batch_size": 2, "max_new_tokens": 3}
    images, questions = _requests()
    check_shared_path(load_model(spec), images, questions, monkeypatch)


def _encoder_output(**fields):
    from transformers.modeling_outputs import BaseModelOutputWithPooling
    from transformers.models.qwen3_vl.modeling_qwen3_vl import (
        BaseModelOutputWithDeepstackFeatures,
    )

    deep = "deepstack_features" in fields
    cls = BaseModelOutputWithDeepstackFeatures if deep else BaseModelOutputWithPooling
    return cls(last_hidden_state=torch.zeros(1), **fields)


@pytest.mark.parametrize("layout", ["batched tensor", "tuple per image", "list per image"])
def test_encoder_outputs_split_per_image_and_join_in_request_order(layout):
    """Image a has 2 feature rows, image b 1 (a batched tensor has 1 each): the batch
    [b, a, b] joins b's rows, a's, b's again, and the hidden states are not kept."""
    from vqarobust.models.chat import join_encoder_outputs, split_encoder_output

    a, b = torch.tensor([[1.0], [2.0]]), torch.tensor([[3.0]])
    pooled = {
        "batched tensor": torch.tensor([[[1.0]], [[3.0]]]),
        "tuple per image": (a, b),
        "list per image": [a, b],
    }[layout]
    per_image = split_encoder_output(_encoder_output(pooler_output=pooled), 2)
    joined = join_encoder_outputs([per_image[1], per_image[0], per_image[1]], torch.device("cpu"))
    assert joined.last_hidden_state is None
    if layout == "batched tensor":
        assert joined.pooler_output.tolist() == [[[3.0]], [[1.0]], [[3.0]]]
    else:
        assert type(joined.pooler_output) is type(pooled)
        assert [t.tolist() for t in joined.pooler_output] == [[[3.0]], [[1.0], [2.0]], [[3.0]]]


def test_deepstack_features_split_per_layer_then_image():
    from vqarobust.models.chat import join_encoder_outputs, split_encoder_output

    a, b = torch.tensor([[1.0]]), torch.tensor([[2.0]])
    layers = [(a, b), (a + 10, b + 10)]
    output = _encoder_output(pooler_output=(a, b), deepstack_features=layers)
    per_image = split_encoder_output(output, 2)
    joined = join_encoder_outputs([per_image[1], per_image[0]], torch.device("cpu"))
    assert [[t.item() for t in layer] for layer in joined.deepstack_features] == [[2, 1], [12, 11]]


def test_an_encoder_output_that_does_not_split_per_image_is_refused():
    from vqarobust.models.chat import split_encoder_output

    with pytest.raises(ValueError, match="returned 3 parts for 2 images"):
        split_encoder_output(_encoder_output(pooler_output=torch.zeros(3, 4, 8)), 2)

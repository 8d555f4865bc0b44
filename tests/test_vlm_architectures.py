"""Today's chat VLMs through the ``image-text-to-text`` family, one tiny checkpoint per
architecture (tests/tiny_vlms.py): the real model, processor and image-processor classes,
loaded by ``path_or_id`` as a config entry loads them."""

from __future__ import annotations

import pytest
from PIL import Image

from tests.tiny_checkpoints import random_images
from tests.tiny_vlms import BUILDERS, RENDERED, check_shared_path
from vqarobust.models import load_model
from vqarobust.models.chat import DEFAULT_PROMPT, PREFIX_PROMPT
from vqarobust.models.postprocess import short_answer

# Requests of different lengths about images of different sizes and aspect ratios: each
# architecture resizes, tiles or splits them differently, so rows of one batch differ in
# image tokens as well as in text.
QUESTIONS = [
    "what color is the circle?",
    "is there a dog?",
    "how many?",
    "what shape is there in the image?",
    "does the image contain a red triangle?",
]
SIZES = [(40, 50), (40, 50), (70, 30), (50, 50), (30, 64)]
# Nine checkpoints built and loaded, 49 tests: about 30 s (tests/conftest.py orders by it).
COST_SECONDS = 30
CLASSES = {
    "qwen2-vl": ("Qwen2VLForConditionalGeneration", "Qwen2VLProcessor"),
    "qwen2.5-vl": ("Qwen2_5_VLForConditionalGeneration", "Qwen2_5_VLProcessor"),
    "qwen3-vl": ("Qwen3VLForConditionalGeneration", "Qwen3VLProcessor"),
    "idefics3": ("Idefics3ForConditionalGeneration", "Idefics3Processor"),
    "smolvlm": ("SmolVLMForConditionalGeneration", "SmolVLMProcessor"),
    "llava-onevision": ("LlavaOnevisionForConditionalGeneration", "LlavaOnevisionProcessor"),
    "gemma3": ("Gemma3ForConditionalGeneration", "Gemma3Processor"),
    "paligemma2": ("PaliGemmaForConditionalGeneration", "PaliGemmaProcessor"),
}


def _images():
    # Seeded per position (random_images seeds image i with i).
    return [random_images(i + 1, size)[i] for i, size in enumerate(SIZES)]


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def vlm(request, tmp_path_factory):
    arch = request.param
    path = BUILDERS[arch](tmp_path_factory.mktemp(arch.replace(".", "_")))
    entry = {"family": "image-text-to-text", "path_or_id": str(path), "max_new_tokens": 4}
    return arch, load_model({**entry, "batch_size": 5}, name=arch), path


def test_the_architecture_loads_with_its_own_classes(vlm):
    arch, model, _ = vlm
    assert (type(model.model).__name__, type(model.processor).__name__) == CLASSES[arch]


def test_the_prompt_is_the_models_own_format_with_the_short_answer_instruction(vlm):
    arch, model, _ = vlm
    (prompt,) = model._prompts(["Q?"])
    if arch == "paligemma2":
        assert prompt == model.processor.image_token + PREFIX_PROMPT.format(question="Q?")
    else:
        assert prompt == RENDERED[arch].replace("Q?", DEFAULT_PROMPT.format(question="Q?"))


def test_left_padded_batches_answer_as_single_requests(vlm):
    arch, model, _ = vlm
    images = _images()
    answers, replies = model.respond_all(images, QUESTIONS)
    single = [model.respond_all([im], [q]) for im, q in zip(images, QUESTIONS, strict=True)]
    assert replies == [r[0] for _, r in single]
    assert answers == [a[0] for a, _ in single]
    assert answers == [short_answer(r) for r in replies]
    # The tiny model's replies depend on the request: a batching bug would show.
    assert len(set(replies)) >= 3, replies


def test_only_the_new_tokens_are_decoded(vlm):
    import torch

    arch, model, _ = vlm
    image, question = _images()[2], QUESTIONS[2]
    inputs = model.processor(images=[[image]], text=model._prompts([question]), return_tensors="pt")
    inputs = {k: v for k, v in inputs.items() if k != "labels"}
    with torch.inference_mode():
        out = model.model.generate(**inputs, max_new_tokens=4, do_sample=False)
    prompt_length = inputs["input_ids"].shape[1]
    expected = model.processor.decode(out[0, prompt_length:], skip_special_tokens=True)
    assert model.reply([image], [question]) == [expected]
    assert out.shape[1] > prompt_length


def test_the_memory_estimate_counts_the_weights_and_the_cache_that_run(vlm):
    """The config's estimate against the loaded model: the parameter count built on the
    meta device equals the real one, and a prefill's KV cache per token equals the
    estimate's (at most it, for sliding-window layers, which keep fewer tokens)."""
    import torch

    from vqarobust.models.memory import estimate_checkpoint, kv_bytes_per_token, parameter_count

    arch, model, path = vlm
    assert parameter_count(model.model.config) == model.parameter_count()
    images = _images()[:2]
    inputs = model._inputs(images, QUESTIONS[:2])
    with torch.inference_mode():
        cache = model.model(**inputs, use_cache=True).past_key_values
    cached = sum(
        t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values)
    )
    per_token = cached / (2 * inputs["input_ids"].shape[1])
    estimated = kv_bytes_per_token(model.model.config, 4)
    layer_types = getattr(model.model.config.get_text_config(), "layer_types", None) or []
    if "sliding_attention" in layer_types:
        assert per_token <= estimated
    else:
        assert per_token == estimated
    estimate = estimate_checkpoint(str(path), batch_size=8, dtype="float32", max_new_tokens=4)
    assert estimate.parameters == model.parameter_count()
    assert estimate.kv_bytes_per_token == estimated
    # The probe is one 640x480 image: its tokens are what the processor makes of it.
    probe = model._inputs([Image.new("RGB", (640, 480))], ["What is it?"])
    assert estimate.tokens_per_request == probe["input_ids"].shape[1] + 4


def test_shared_image_features_answer_as_the_plain_path(vlm, monkeypatch):
    """Each distinct image is encoded once per call, across batches of 2, and replies and
    handed features equal the plain path's (tests/tiny_vlms.py, check_shared_path)."""
    arch, model, _ = vlm
    distinct = _images()
    # Repeats fall into different batches of 2: the second batch reuses the first's.
    images = [distinct[0], distinct[2], distinct[0], distinct[3], distinct[2], distinct[0]]
    monkeypatch.setattr(model, "batch_size", 2)
    replies = check_shared_path(model, images, [*QUESTIONS, "what?"], monkeypatch)[1]
    assert len(set(replies)) >= 3, replies


def test_only_a_tested_architecture_that_takes_precomputed_features_shares(
    tmp_path, caplog, monkeypatch
):
    """A model class whose ``forward`` takes no ``mm_encoder_outputs`` (as a remote-code
    model may), or an architecture outside ``SHARED_ENCODERS``, shares nothing by default,
    says why, and refuses an explicit request; a tested one shares unless told not to."""
    from transformers import PaliGemmaForConditionalGeneration

    import vqarobust.models.chat as chat

    class PixelsOnly(PaliGemmaForConditionalGeneration):
        def forward(self, input_ids=None, attention_mask=None, pixel_values=None, **kwargs):
            return super().forward(input_ids, pixel_values, attention_mask, **kwargs)

    class PixelsOnlyVQA(chat.ChatVQA):
        model_class = PixelsOnly

    path = str(BUILDERS["paligemma2"](tmp_path))
    no_input = "PixelsOnly.forward takes no precomputed image features"
    with caplog.at_level("WARNING", logger="vqarobust.models.chat"):
        assert not PixelsOnlyVQA(path, name="m").share_image_features
    assert f"'m': {no_input}; every request's image is encoded" in caplog.text
    assert PixelsOnlyVQA(path, name="m", share_image_features=False).share_image_features is False
    with pytest.raises(ValueError, match=f"'m': share_image_features is true, but {no_input}"):
        PixelsOnlyVQA(path, name="m", share_image_features=True)

    assert chat.ChatVQA(path, name="m").share_image_features
    assert not chat.ChatVQA(path, name="m", share_image_features=False).share_image_features
    tested = tuple(t for t in chat.SHARED_ENCODERS if t != "paligemma")
    monkeypatch.setattr(chat, "SHARED_ENCODERS", tested)
    untested = f"sharing image features is tested for {', '.join(tested)}, not paligemma"
    caplog.clear()
    with caplog.at_level("WARNING", logger="vqarobust.models.chat"):
        assert not chat.ChatVQA(path, name="m").share_image_features
    assert f"'m': {untested}; every request's image is encoded" in caplog.text
    with pytest.raises(ValueError, match=f"'m': share_image_features is true, but {untested}"):
        chat.ChatVQA(path, name="m", share_image_features=True)

"""VLE: the fusion layer against transformers' BERT blocks, the public checkpoint layout
(every tensor used, none missing, weights-only loading) and answers through load_model."""

from __future__ import annotations

import pytest
import torch

from tests.tiny_checkpoints import VLE_LABELS, random_images, tiny_vle, vle_public_names
from vqarobust.models import load_model
from vqarobust.models.vle import (
    CheckpointError,
    CrossLayer,
    VLEForVQA,
    additive_mask,
    load_vle,
    map_public_names,
    read_checkpoint,
    read_config,
)


@pytest.fixture(scope="module")
def vle_path(tmp_path_factory):
    return tiny_vle(tmp_path_factory.mktemp("vle") / "st")


QUESTIONS = [
    "what color is the shape?",
    "is there a circle?",
    "how many dog",
    "does the image contain a red triangle?",
    "what shape is there?",
]


def test_cross_layer_equals_the_bert_blocks_vle_is_built_from():
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertAttention, BertIntermediate, BertOutput

    fusion = {
        "hidden_size": 24,
        "num_attention_heads": 2,
        "intermediate_size": 48,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
    }
    ours = CrossLayer(fusion).eval()
    cfg = BertConfig(
        hidden_size=24,
        num_attention_heads=2,
        intermediate_size=48,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    cfg._attn_implementation = "eager"
    ref = torch.nn.Module()
    ref.attention = BertAttention(cfg)
    ref.crossattention = BertAttention(cfg, is_cross_attention=True)
    ref.intermediate, ref.output = BertIntermediate(cfg), BertOutput(cfg)
    ref.load_state_dict(ours.state_dict(), strict=True)  # same tensor names, all of them
    ref.eval()
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 5, 24, generator=gen), torch.randn(2, 7, 24, generator=gen)
    x_mask = additive_mask(torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]), x.dtype)
    y_mask = additive_mask(torch.ones(2, 7, dtype=torch.long), x.dtype)
    with torch.no_grad():
        a = ref.attention(x, attention_mask=x_mask)[0]
        c = ref.crossattention(a, encoder_hidden_states=y, encoder_attention_mask=y_mask)[0]
        expected = ref.output(ref.intermediate(c), c)
        assert torch.allclose(ours(x, y, x_mask, y_mask), expected, atol=1e-5)


def test_every_public_tensor_is_used_and_none_is_missing(vle_path):
    state = read_checkpoint(vle_path)
    assert sorted(state) == sorted(vle_public_names(1, 1, 2))
    model = VLEForVQA(read_config(vle_path))
    mapped = map_public_names(state, model)
    # Two position-id buffers are checked and dropped; every other tensor is a parameter.
    assert len(mapped) == len(state) - 2 == len(model.state_dict())
    from vqarobust.models.vle import public_name

    names = {public_name(n) for n in model.state_dict()}
    assert names == set(state) - {n for n in state if n.endswith("position_ids")}
    loaded, labels = load_vle(vle_path)
    assert labels == dict(enumerate(VLE_LABELS))
    public = "vle.cross_modal_image_layers.1.crossattention.self.key.weight"
    assert torch.equal(
        loaded.cross_modal_image_layers[1].crossattention.self.key.weight, state[public]
    )
    vision = "vle.vision_model.vision_model.encoder.layers.0.mlp.fc1.weight"
    assert torch.equal(loaded.vision.encoder.layers[0].mlp.fc1.weight, state[vision])


def test_checkpoints_that_do_not_fit_are_refused(tmp_path):
    extra = {"vle.cross_modal_text_layers.2.output.dense.weight": torch.zeros(24, 48)}
    with pytest.raises(CheckpointError, match=r"1 tensors unused \(vle.cross_modal_text_layers.2"):
        load_vle(tiny_vle(tmp_path / "extra", extra=extra))
    drop = ("vqa_classifier.3.bias",)
    with pytest.raises(CheckpointError, match=r"1 missing \(vqa_classifier.3.bias\)"):
        load_vle(tiny_vle(tmp_path / "drop", drop=drop))
    wrong = {"vle.token_type_embeddings.weight": torch.zeros(3, 24)}
    with pytest.raises(CheckpointError, match=r"token_type_embeddings.weight: shape \(3, 24\)"):
        load_vle(tiny_vle(tmp_path / "shape", extra=wrong))
    ids = {"vle.text_model.embeddings.position_ids": torch.arange(64).flip(0)[None]}
    with pytest.raises(CheckpointError, match="position ids are not 0..63"):
        load_vle(tiny_vle(tmp_path / "ids", extra=ids))


class Payload:
    """Not a tensor: a weights-only load must refuse to rebuild it."""

    def __reduce__(self):
        return (print, ("unpickled!",))


def test_pytorch_bin_is_loaded_weights_only(tmp_path, vle_path, capsys):
    bin_path = tiny_vle(tmp_path / "bin", fmt="bin")
    assert (bin_path / "pytorch_model.bin").is_file() and not (
        bin_path / "model.safetensors"
    ).exists()
    a, _ = load_vle(bin_path)
    b, _ = load_vle(vle_path)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    state = torch.load(bin_path / "pytorch_model.bin", weights_only=True)
    state["vqa_classifier.3.bias"] = Payload()
    torch.save(state, bin_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="not a weights-only checkpoint"):
        load_vle(bin_path)
    assert "unpickled!" not in capsys.readouterr().out


def test_config_must_describe_vle(tmp_path, vle_path):
    import json
    import shutil

    other = tmp_path / "other"
    shutil.copytree(vle_path, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "vilt"}))
    with pytest.raises(CheckpointError, match="model_type 'vilt', not 'vle'"):
        load_vle(other)
    config["vision_config"]["model_type"] = "siglip_vision_model"
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="vision tower must be CLIP"):
        load_vle(other)


def test_vle_answers_through_load_model(vle_path):
    model = load_model({"family": "vle", "path_or_id": str(vle_path), "batch_size": 2})
    images = random_images(5)
    answers = model.answer_all(images, QUESTIONS)
    assert len(answers) == 5 and set(answers) <= set(VLE_LABELS)
    assert [model.answer([im], [q])[0] for im, q in zip(images, QUESTIONS, strict=True)] == answers
    plain = load_model(
        {"family": "vle", "path_or_id": str(vle_path), "share_image_features": False}
    )
    assert plain.answer_all(images, QUESTIONS) == answers
    # The answer depends on the image and on the question.
    with torch.no_grad():
        text = model.tokenizer(QUESTIONS[:1] * 2, return_tensors="pt")
        pixels = model.image_processor(images[:2], return_tensors="pt")["pixel_values"]
        logits = model.model(
            text["input_ids"], text["attention_mask"], model.model.encode_images(pixels)
        )
    assert not torch.allclose(logits[0], logits[1])
    with pytest.raises(ValueError, match="runs no remote code"):
        load_model({"family": "vle", "path_or_id": str(vle_path), "trust_remote_code": True})

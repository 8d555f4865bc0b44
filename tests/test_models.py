"""Offline tests of the model adapters on tiny random-initialised checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vqarobust import store
from vqarobust.models import FAMILIES, load_model
from vqarobust.models.architectures import ARCHITECTURES, build_architecture
from vqarobust.models.base import SharesImageFeatures, VQAModel
from vqarobust.models.loading import MissingWeightsError
from vqarobust.models.recipe import Recipe
from vqarobust.models.training import train_reference_model


def _batch(easy_vqa_eval, n=7):
    q = store.read_questions(easy_vqa_eval["questions"]).slice(0, n).to_pylist()
    imgs = {
        r["image_id"]: Image.fromarray(store.decode_image(r["bytes"]))
        for r in store.iter_images(easy_vqa_eval["images"])
    }
    return [imgs[r["image_id"]] for r in q], [r["question"] for r in q]


@pytest.mark.parametrize("arch", ["vilt", "cnn-bow", "cnn-film"])
def test_saved_checkpoint_loads_through_auto_classes(checkpoints, easy_vqa_eval, arch):
    from transformers import AutoConfig, AutoModelForVisualQuestionAnswering, AutoProcessor

    path = str(checkpoints[arch])
    config = AutoConfig.from_pretrained(path)
    assert config.model_type == ("vilt" if arch == "vilt" else "vqarobust-cnn-bow")
    AutoModelForVisualQuestionAnswering.from_pretrained(path)
    AutoProcessor.from_pretrained(path)

    model = load_model({"family": "vqa-classifier", "path_or_id": path, "batch_size": 3})
    images, questions = _batch(easy_vqa_eval)
    answers = model.answer_all(images, questions)
    assert len(answers) == len(questions)
    assert set(answers) <= set(config.id2label.values())
    # Batching and sorting must not change any answer.
    one_by_one = [model.answer([im], [q])[0] for im, q in zip(images, questions, strict=True)]
    assert answers == one_by_one


def test_training_is_seeded(easy_vqa_train, tmp_path):
    from safetensors.numpy import load_file

    kw = {"channels": [4], "hidden_dim": 8, "epochs": 0.3, "batch_size": 16}
    for name in ("a", "b"):
        train_reference_model(
            str(easy_vqa_train["questions"]),
            str(easy_vqa_train["images"]),
            tmp_path / name,
            Recipe.of("cnn-bow", **kw),
        )
    a = load_file(tmp_path / "a" / "model.safetensors")
    b = load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_pretraining_sees_only_its_answers_first_then_every_question(
    easy_vqa_train, tmp_path, caplog
):
    import logging

    questions = store.read_questions(easy_vqa_train["questions"])
    shapes = ["circle", "rectangle", "triangle"]
    n_shape = sum(a[0] in shapes for a in questions.column("answers").to_pylist())
    small = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
    args = (str(easy_vqa_train["questions"]), str(easy_vqa_train["images"]))
    with caplog.at_level(logging.INFO, logger="vqarobust.models.training"):
        stats = train_reference_model(
            *args,
            tmp_path / "m",
            Recipe.of(
                "vilt", epochs=0.5, batch_size=8, pretrain={"answers": shapes, "epochs": 2}, **small
            ),
        )
    assert f"pretraining on the {n_shape} questions answered circle, rectangle" in caplog.text
    # round(2 * n_shape / 8) pretraining steps, then round(0.5 * all / 8).
    assert stats["steps"] == round(2 * n_shape / 8) + round(0.5 * questions.num_rows / 8)
    with pytest.raises(ValueError, match=r"no training question has answer \['hexagon'\]"):
        train_reference_model(
            *args,
            tmp_path / "x",
            Recipe.of("vilt", pretrain={"answers": ["hexagon"], "epochs": 1}, **small),
        )
    with pytest.raises(ValueError, match="random questions without SwapMix"):
        train_reference_model(
            *args,
            tmp_path / "y",
            Recipe.of("cnn-bow", channels=[4], pretrain={"answers": shapes, "epochs": 1}),
        )


class Echo(VQAModel):
    def __init__(self):
        super().__init__(batch_size=2)
        self.batches: list[list[str]] = []

    def answer(self, images, questions):
        self.batches.append(list(questions))
        return [q.upper() for q in questions]


def test_answer_all_sorts_longest_first_and_restores_order():
    m = Echo()
    qs = ["a", "ccc", "bb", "dddd", "e"]
    assert m.answer_all([None] * 5, qs) == [q.upper() for q in qs]
    assert m.batches[0] == ["dddd", "ccc"]
    with pytest.raises(ValueError, match="5 images but 4 questions"):
        m.answer_all([None] * 5, qs[:4])


class Cached(SharesImageFeatures):
    """Encodes through the shared cache and records, per batch, what it encoded and
    which images the cache still holds afterwards."""

    def __init__(self):
        super().__init__(batch_size=1)
        self.encoded: list[list[str]] = []
        self.held: list[set[str]] = []

    def answer(self, images, questions):
        features = self.image_features(images, self._encode)
        call = self._calls.current
        self.held.append(set(call.features.values()) if call is not None else set())
        return features

    def _encode(self, images):
        self.encoded.append([im.label for im in images])
        return [im.label for im in images]


class Labelled:
    def __init__(self, label):
        self.label = label


def test_a_shared_image_leaves_the_cache_after_its_last_request():
    """Requests about a, b, a, c, longest question first, one per batch: a is encoded
    once and held until its second request, b and c leave with their only one; a retried
    batch (out of memory) re-encodes, never misanswers."""
    a, b, c = Labelled("a"), Labelled("b"), Labelled("c")
    model = Cached()
    answers = model.answer_all([a, b, a, c], ["aaaa", "bbb", "cc", "d"])
    assert answers == ["a", "b", "a", "c"]
    assert model.encoded == [["a"], ["b"], ["c"]]
    assert model.held == [{"a"}, {"a"}, set(), set()]
    assert model._calls.current is None


class RunsOutOnce(Cached):
    """Runs out of memory once, after encoding, on its first batch of two."""

    def answer(self, images, questions):
        features = super().answer(images, questions)
        if len(images) == 2 and not getattr(self, "ran_out", False):
            self.ran_out = True
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return features


def test_a_batch_retried_after_running_out_of_memory_re_encodes_but_answers_right():
    """Batch [a, b] fails after counting its requests down (b's to 0: b leaves). Halved,
    the retry [a] finds a cached and counts it down again (to 0: a leaves early); [b] then
    encodes b again, and so does the last request about a: two encodes more, and every
    answer from its own image."""
    a, b, c = Labelled("a"), Labelled("b"), Labelled("c")
    model = RunsOutOnce()
    model.batch_size = 2
    assert model.answer_all([a, b, a, c], ["aaaa", "bbb", "cc", "d"]) == ["a", "b", "a", "c"]
    assert model.batch_size == 1
    assert model.encoded == [["a", "b"], ["b"], ["a"], ["c"]]


def test_missing_weights_fail_fast_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(MissingWeightsError, match="model 'vilt'.*not in the local Hugging Face"):
        load_model(
            {"family": "vqa-classifier", "path_or_id": "dandelin/vilt-b32-finetuned-vqa"},
            name="vilt",
        )
    with pytest.raises(MissingWeightsError, match="no checkpoint directory"):
        load_model({"family": "vqa-classifier", "path_or_id": str(tmp_path / "nowhere")})
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingWeightsError, match="no config.json"):
        load_model({"family": "vqa-classifier", "path_or_id": str(tmp_path / "empty")})


def test_registries_list_their_names():
    assert FAMILIES.list() == [
        "blip",
        "image-text-to-text",
        "imported",
        "llava",
        "lxmert",
        "openai-chat",
        "pnp-vqa",
        "vle",
        "vqa-classifier",
    ]
    assert ARCHITECTURES.list() == ["cnn-bow", "lxmert", "vilt"]
    with pytest.raises(KeyError, match="unknown model family 'lavis'"):
        load_model({"family": "lavis", "path_or_id": "x"})


class Flaky(VQAModel):
    """Runs out of memory on batches larger than 2."""

    def __init__(self, error: Exception):
        super().__init__(batch_size=8)
        self.error = error
        self.sizes: list[int] = []

    def answer(self, images, questions):
        self.sizes.append(len(questions))
        if len(questions) > 2:
            raise self.error
        return list(questions)


def test_out_of_memory_halves_the_batch_and_retries():
    import torch

    m = Flaky(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    qs = [f"q{i}" for i in range(7)]
    assert m.answer_all([None] * 7, qs) == qs
    assert m.sizes[:3] == [7, 4, 2] and m.batch_size == 2


def test_other_errors_propagate():
    m = Flaky(ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        m.answer_all([None] * 4, ["a", "b", "c", "d"])


def test_repository_lists_the_papers_models():
    from vqarobust.models.repository import read_repository

    repo = read_repository()
    ids = {e.get("path_or_id") for e in repo.values()}
    assert {
        "dandelin/vilt-b32-finetuned-vqa",
        "Salesforce/blip-vqa-base",
        "Salesforce/blip-vqa-capfilt-large",
        "llava-hf/llava-1.5-7b-hf",
        "llava-hf/llava-1.5-13b-hf",
        "hfl/vle-base-for-vqa",
    } <= ids
    pnp = repo["pnp-vqa-large"]
    assert (pnp["itm_model"], pnp["caption_model"], pnp["qa_model"]) == (
        "Salesforce/blip-itm-large-coco",
        "Salesforce/blip-image-captioning-large",
        "allenai/unifiedqa-v2-t5-large-1363200",
    )
    for name, entry in repo.items():
        # Every paper model has an adapter: no entry is left "unavailable".
        assert entry["family"] in FAMILIES, name
        assert {"dtype", "batch_size", "gpu_memory_gb", "mem_mb", "runtime"} <= set(entry), name


def test_repository_names_load_or_fail_fast(tmp_path, monkeypatch):
    import time

    from vqarobust.models.repository import ModelUnavailableError, resolve_spec

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    t0 = time.perf_counter()
    with pytest.raises(MissingWeightsError, match="model 'llava-1.5-7b'.*hf download"):
        load_model("llava-1.5-7b")
    assert time.perf_counter() - t0 < 30
    with pytest.raises(MissingWeightsError, match=r"'pnp-vqa-large \(itm_model\)'.*blip-itm"):
        load_model("pnp-vqa-large")
    with pytest.raises(MissingWeightsError, match="model 'vle-base-vqa'.*hf download hfl/vle"):
        load_model("vle-base-vqa")
    with pytest.raises(KeyError, match="repository lists"):
        load_model("gpt-17")
    # The mechanism stays for models listed before their adapter exists.
    listed = tmp_path / "repo.yaml"
    listed.write_text("future:\n  family: unavailable\n  needs: an adapter for X\n")
    with pytest.raises(ModelUnavailableError, match="an adapter for X"):
        resolve_spec("future", repository=listed)


def test_config_entries_can_start_from_the_repository():
    from vqarobust.config import ConfigError, validate_config

    cfg = {
        "dataset": {"name": "d", "adapter": "easy-vqa"},
        "corruptions": ["snow"],
        "models": {"blip": {"from_repository": "blip-vqa-base", "batch_size": 8}},
    }
    entry = validate_config(cfg)["models"]["blip"]
    assert entry["family"] == "blip" and entry["path_or_id"] == "Salesforce/blip-vqa-base"
    assert entry["batch_size"] == 8
    cfg["models"] = {
        "vle": {"from_repository": "vle-base-vqa"},
        "pnp": {"from_repository": "pnp-vqa-large"},
    }
    models = validate_config(cfg)["models"]
    assert models["vle"]["family"] == "vle" and models["vle"]["device"] == "cuda"
    assert models["pnp"]["qa_model"] == "allenai/unifiedqa-v2-t5-large-1363200"
    cfg["models"] = {"vle": {"from_repository": "vle"}}
    with pytest.raises(ConfigError, match="models.vle.from_repository.*unknown model 'vle'"):
        validate_config(cfg)


def test_training_rejects_mixed_image_sizes(tmp_path):
    import pyarrow as pa

    from vqarobust import store

    rows = []
    for i, side in enumerate((32, 40)):
        img = np.zeros((side, side, 3), np.uint8)
        rows.append(
            {
                "image_id": i,
                "bytes": store.encode_image(img),
                "format": "png",
                "width": side,
                "height": side,
            }
        )
    store.write_image_shards(rows, tmp_path / "images")
    q = [
        {
            "question_id": i,
            "image_id": i,
            "question": "is it?",
            "answers": ["yes"] * 10,
            "question_type": "is",
        }
        for i in range(2)
    ]
    store.write_table(pa.Table.from_pylist(q, schema=store.QUESTION_SCHEMA), tmp_path / "q.parquet")
    with pytest.raises(ValueError, match="images of one size"):
        train_reference_model(
            str(tmp_path / "q.parquet"),
            str(tmp_path / "images"),
            tmp_path / "m",
            Recipe.of("cnn-bow"),
        )
    assert not (tmp_path / "m").exists()


def _cnn(fusion: str, **kw):
    import torch

    torch.manual_seed(0)
    options = {"channels": [4, 8], "hidden_dim": 16, "fusion": fusion, **kw}
    model = build_architecture(
        "cnn-bow", options, vocab_size=12, labels=["a", "b", "c"], image_size=32
    )
    return model.eval()


def test_late_fusion_initialisation_is_pinned():
    # The FiLM option must not change how a seed initialises the late-fusion model:
    # the default run's trained CNN+BoW (and its numbers in the README) depend on it.
    import torch

    state = _cnn("late").state_dict()
    assert list(state)[:3] == [
        "image_encoder.0.weight",
        "image_encoder.1.weight",
        "image_encoder.1.bias",
    ]
    total = sum(float(v.double().abs().sum()) for v in state.values() if v.is_floating_point())
    assert total == pytest.approx(105.482015, abs=1e-5)
    assert torch.equal(state["word_embeddings.weight"][0], torch.zeros(64))


def test_film_conditions_every_layer_on_the_question():
    import torch

    model = _cnn("film", film_blocks=1, first_stride=2)
    assert model.film_sizes == [4, 8, 8]  # two stem layers, one residual block
    assert model.film.out_features == 2 * 20
    assert not model.image_features_shared and _cnn("late").image_features_shared
    pixels = torch.randn(2, 3, 32, 32)
    ids = torch.tensor([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]])
    out = model(input_ids=ids, pixel_values=pixels).logits
    # Padding after the question does not reach the question vector.
    longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    assert torch.allclose(model(input_ids=longer, pixel_values=pixels).logits, out, atol=1e-6)
    # One row per distinct image plus an index = one row per question.
    index = torch.tensor([1, 0, 1])
    q3 = ids[[0, 1, 1]]
    shared = model(input_ids=q3, pixel_values=pixels, image_index=index).logits
    assert torch.allclose(shared, model(input_ids=q3, pixel_values=pixels[index]).logits)
    # The question changes what the image encoder computes: with the classifier's input
    # recorded, two questions about the same image give different pooled features.
    seen = []
    model.classifier.register_forward_hook(lambda m, i, o: seen.append(i[0]))
    model(input_ids=ids, pixel_values=pixels[[0, 0]])
    assert not torch.allclose(seen[0][0], seen[0][1])
    with pytest.raises(ValueError, match="no question-independent image features"):
        model.encode_images(pixels)


def test_film_gradients_reach_the_question_encoder_and_the_first_layer():
    import torch

    model = _cnn("film").train()
    ids = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    out = model(input_ids=ids, pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([0, 2]))
    out.loss.backward()
    for name in (
        "question_encoder.weight_ih_l0",
        "film.weight",
        "stem.0.conv.weight",
        "blocks.0.conv2.weight",
        "word_embeddings.weight",
    ):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name


def test_unknown_fusion_is_refused():
    from vqarobust.models.cnn_bow import CnnBowConfig

    with pytest.raises(ValueError, match="fusion must be one of"):
        CnnBowConfig(fusion="early")


def test_training_keys_of_another_architecture_are_refused():
    import yaml

    from tests.conftest import REPO
    from vqarobust.config import ConfigError, validate_config

    config = yaml.safe_load((REPO / "config" / "scenes.yaml").read_text())
    validate_config(config)
    config["models"]["vilt-tiny"]["train"]["fusion"] = "film"
    message = r"models.vilt-tiny.train: 'fusion' not used by architecture 'vilt' \(it takes hid"
    with pytest.raises(ConfigError, match=message):
        validate_config(config)
    del config["models"]["vilt-tiny"]["train"]["fusion"]
    config["models"]["cnn-film"]["train"]["patch_size"] = 16
    with pytest.raises(ConfigError, match=r"'patch_size' not used by architecture 'cnn-bow'"):
        validate_config(config)
    del config["models"]["cnn-film"]["train"]["patch_size"]
    config["models"]["cnn-film"]["train"]["fusion"] = "early"
    with pytest.raises(ConfigError, match=r"models.cnn-film.train.fusion.*'early'"):
        validate_config(config)


def test_an_entry_without_a_batch_size_gets_its_familys():
    """One place for the default (vqarobust.models): 64, and 8 for the families that hold
    far more per question (chat prompts, PNP-VQA's captions)."""
    from vqarobust.config import validate_config
    from vqarobust.models import DEFAULT_BATCH_SIZE, SMALL_BATCH_SIZE

    cfg = {
        "dataset": {"name": "d", "adapter": "easy-vqa"},
        "corruptions": ["snow"],
        "models": {
            "blip": {"family": "blip", "path_or_id": "x"},
            "chat": {"family": "image-text-to-text", "path_or_id": "y"},
            "pnp": {"from_repository": "pnp-vqa-large", "batch_size": 4},
        },
    }
    models = validate_config(cfg)["models"]
    assert (DEFAULT_BATCH_SIZE, SMALL_BATCH_SIZE) == (64, 8)
    assert [models[m]["batch_size"] for m in ("blip", "chat", "pnp")] == [64, 8, 4]


def test_an_adapter_overriding_answer_all_alone_is_refused():
    from vqarobust.models.base import VQAModel

    with pytest.raises(TypeError, match="Old overrides answer_all.*override respond "):

        class Old(VQAModel):
            def answer(self, images, questions):
                return ["x"] * len(questions)

            def answer_all(self, images, questions, progress=None):
                return ["x"] * len(questions)

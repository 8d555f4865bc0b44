"""Region features: the table and its word vectors, GloVe files, perfect sight, the
detector-like CNN, the feature reader with swaps, the LXMERT adapter on a tiny random
checkpoint, inference over feature subsets, and the config checks."""

from __future__ import annotations

import json
import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.tiny_checkpoints import tiny_lxmert
from vqarobust import store
from vqarobust.features.perfect_sight import encode_object, perfect_sight_table
from vqarobust.features.table import (
    FeatureTable,
    RegionFeatures,
    feature_table,
    read_info,
    write_features,
)
from vqarobust.features.word_vectors import read_glove, word_vectors
from vqarobust.models import ModelRef


def test_glove_file_streamed_multiword_means_and_missing_names(tmp_path, caplog):
    path = tmp_path / "glove.txt"
    path.write_text("red 1 0 0\ncircle 0 1 0\ndining 0 0 2\ntable 0 2 0\nunused 9 9 9\n")
    assert set(read_glove(path, ["red", "table"])) == {"red", "table"}
    with caplog.at_level(logging.WARNING):
        vectors = word_vectors(["red", "dining table", "zebra"], str(path))
    np.testing.assert_array_equal(vectors["dining table"], [0, 1, 1])  # mean of the words
    np.testing.assert_array_equal(vectors["zebra"], [0, 0, 0])
    assert "1 of 3 names have no word in the file" in caplog.text and "zebra" in caplog.text
    (tmp_path / "bad.txt").write_text("red 1 0 0\ncircle 0 1\n")
    with pytest.raises(ValueError, match="line 2: 2 numbers, expected 3"):
        word_vectors(["red", "circle"], str(tmp_path / "bad.txt"))
    with pytest.raises(ValueError, match="none of the 1 names"):
        word_vectors(["zebra"], str(path))
    # Without a file: the shipped MiniLM, unit length.
    mini = word_vectors(["circle", "square"])
    assert mini["circle"].shape == (384,) and abs(np.linalg.norm(mini["circle"]) - 1) < 1e-5


def _objects():
    return [
        {
            "image_id": i,
            "object_index": j,
            "object_id": str(j),
            "box": [0.1 * j, 0.0, 0.1 * j + 0.1, 0.5],
            "class": c,
            "attributes": a,
        }
        for i, objs in ((4, [("circle", ["red"]), ("star", [])]), (7, [("star", ["blue"])]))
        for j, (c, a) in enumerate(objs)
    ]


VOCAB = {
    "circle": np.array([1, 0], np.float32),
    "star": np.array([0, 1], np.float32),
    "red": np.array([2, 0], np.float32),
    "blue": np.array([0, 4], np.float32),
}


def test_perfect_sight_rows_and_the_table_round_trip(tmp_path):
    table = perfect_sight_table(_objects(), VOCAB)
    path = tmp_path / "f.parquet"
    write_features(table, path, {"kind": "perfect_sight"}, VOCAB)
    assert read_info(path) == {"kind": "perfect_sight", "dim": 4}
    bank = FeatureTable.read(path)
    region = bank.region_features(4)
    np.testing.assert_array_equal(
        region.features, [[1, 0, 2, 0], [0, 1, 0, 0]]
    )  # no attributes: zeros
    np.testing.assert_allclose(region.boxes[1], [0.1, 0.0, 0.2, 0.5], rtol=1e-6)
    np.testing.assert_array_equal(bank.encode_labels("star", ["red", "blue"]), [0, 1, 1, 2])
    assert bank.labels(7) == [("star", ("blue",), "0")] and 5 not in bank
    with pytest.raises(KeyError, match="no word vector"):
        encode_object("zebra", [], VOCAB)
    with pytest.raises(ValueError, match="different lengths"):
        write_features(
            feature_table(
                [{**_objects()[0], "feature": [1.0]}, {**_objects()[1], "feature": [1.0, 2.0]}]
            ),
            tmp_path / "g.parquet",
            {"kind": "x"},
        )
    pq.write_table(pa.table({"a": [1]}), tmp_path / "plain.parquet")
    with pytest.raises(ValueError, match="not a feature table"):
        read_info(tmp_path / "plain.parquet")


def test_the_reader_makes_each_swapped_set_from_its_source(tmp_path):
    from vqarobust.context.feature_swaps import FEATURE_SWAP_SCHEMA
    from vqarobust.features.reader import FeatureReader

    path = tmp_path / "f.parquet"
    write_features(perfect_sight_table(_objects(), VOCAB), path, {"kind": "perfect_sight"}, VOCAB)
    swaps = [
        {
            "question_id": 1,
            "perturbation": "swap_class",
            "severity": 1,
            "rank": 1,
            "image_id": 4000,
            "source_image_id": 4,
            "object_index": 1,
            "donor_image_id": 7,
            "donor_object_index": 0,
            "after_class": "star",
            "after_attributes": ["blue"],
            "before": "star",
            "after": "blue star",
        },
        {
            "question_id": 1,
            "perturbation": "swap_attribute",
            "severity": 1,
            "rank": 1,
            "image_id": 4001,
            "source_image_id": 4,
            "object_index": 0,
            "donor_image_id": None,
            "donor_object_index": None,
            "after_class": "circle",
            "after_attributes": ["blue"],
            "before": "red circle",
            "after": "blue circle",
        },
    ]
    pq.write_table(pa.Table.from_pylist(swaps, schema=FEATURE_SWAP_SCHEMA), tmp_path / "s.parquet")
    reader = FeatureReader(path, tmp_path / "s.parquet")
    assert 4000 in reader and 4 in reader and 4002 not in reader
    got = reader.read([4, 4000, 4001])
    np.testing.assert_array_equal(
        got[4000].features, [[1, 0, 2, 0], [0, 1, 0, 4]]
    )  # the donor's row
    np.testing.assert_array_equal(got[4001].features, [[1, 0, 0, 4], [0, 1, 0, 0]])  # re-encoded
    np.testing.assert_array_equal(got[4].features, [[1, 0, 2, 0], [0, 1, 0, 0]])  # clean untouched
    with pytest.raises(KeyError, match="no features of image 9"):
        reader.read([9])


def test_detector_crops_train_and_extract(tmp_path):
    from vqarobust.datasets import scenes
    from vqarobust.features.detector import WINDOW, DetectorRecipe, crops, train_detector
    from vqarobust.features.extract import FeatureInputs, extract_features

    image = np.zeros((128, 128, 3), np.uint8)
    image[60:70, 20:30] = 255
    patch = crops(image, [(20 / 128, 60 / 128, 30 / 128, 70 / 128), (0.0, 0.0, 0.02, 0.02)])
    assert patch.shape == (2, 3, WINDOW, WINDOW)
    # Centred: the white square sits in the middle of its window (edge padding elsewhere).
    assert patch[0, :, WINDOW // 2, WINDOW // 2].min() == 1.0 and patch[0, :, 0, 0].max() == 0.0
    rows = [
        {
            "image_id": i,
            "bytes": scenes.png(scenes.render(scenes.scene(0, "train", i))),
            "format": "png",
            "width": 128,
            "height": 128,
        }
        for i in range(6)
    ]
    store.write_image_shards(iter(rows), tmp_path / "images")
    recipe = DetectorRecipe(dim=8, epochs=2, batch_size=8)
    stats = train_detector(str(tmp_path / "images"), tmp_path / "det", recipe, split="train")
    assert stats["objects"] == sum(len(scenes.scene(0, "train", i)) for i in range(6))
    assert json.loads((tmp_path / "det" / "detector.json").read_text())["dim"] == 8
    n = extract_features(
        tmp_path / "f.parquet",
        "detector",
        FeatureInputs(images=str(tmp_path / "images"), detector=str(tmp_path / "det")),
        split="train",
    )
    bank = FeatureTable.read(tmp_path / "f.parquet")
    assert (
        n == stats["objects"]
        and bank.dim == 8
        and read_info(tmp_path / "f.parquet")["kind"] == "detector"
    )
    first = scenes.scene(0, "train", 0)
    assert [c for c, _, _ in bank.labels(0)] == [o.shape for o in first]
    # Deterministic: the same weights give the same rows.
    extract_features(
        tmp_path / "g.parquet",
        "detector",
        FeatureInputs(images=str(tmp_path / "images"), detector=str(tmp_path / "det")),
        split="train",
    )
    np.testing.assert_array_equal(FeatureTable.read(tmp_path / "g.parquet").matrix, bank.matrix)


def test_lxmert_loads_offline_and_answers_over_region_features(tmp_path):
    from vqarobust.models import load_model
    from vqarobust.models.lxmert import read_answers

    path = tiny_lxmert(tmp_path / "lx", dim=4)
    model = load_model({"family": "lxmert", "path_or_id": str(path), "batch_size": 2})
    regions = [
        RegionFeatures(
            np.random.default_rng(i).normal(size=(n, 4)).astype(np.float32),
            np.tile(np.array([[0, 0, 0.5, 0.5]], np.float32), (n, 1)),
        )
        for i, n in enumerate((1, 3, 2))
    ]
    answers = model.answer_all(regions, ["is there a red circle?", "what color?", "a?"])
    assert len(answers) == 3 and set(answers) <= {"yes", "no", "red", "circle"}
    # Padding objects are masked out: a request answers the same alone or in a batch.
    assert model.answer(regions[:1], ["is there a red circle?"]) == answers[:1]
    with pytest.raises(ValueError, match="dimension 4 .* got \\[5\\]"):
        model.answer(
            [RegionFeatures(np.zeros((2, 5), np.float32), np.zeros((2, 4), np.float32))], ["a"]
        )
    # The vocabulary from the config's id2label, or a file (list or ans2label).
    named = tiny_lxmert(tmp_path / "named", dim=4, id2label=True)
    assert load_model({"family": "lxmert", "path_or_id": str(named)}).answers == [
        "yes",
        "no",
        "red",
        "circle",
    ]
    plain = tiny_lxmert(tmp_path / "plain", dim=4)
    (plain / "answers.json").unlink()
    with pytest.raises(ValueError, match="no answer vocabulary"):
        load_model({"family": "lxmert", "path_or_id": str(plain)})
    (tmp_path / "ans2label.json").write_text(json.dumps({"no": 1, "yes": 0, "red": 2, "blue": 3}))
    loaded = load_model(
        {"family": "lxmert", "path_or_id": str(plain), "answers": str(tmp_path / "ans2label.json")}
    )
    assert loaded.answers == ["yes", "no", "red", "blue"]
    (tmp_path / "short.json").write_text(json.dumps(["yes"]))
    with pytest.raises(ValueError, match="1 answers, but the model has 4 outputs"):
        load_model(
            {"family": "lxmert", "path_or_id": str(plain), "answers": str(tmp_path / "short.json")}
        )
    assert read_answers(tmp_path / "ans2label.json")[1] == "no"
    (tmp_path / "gap.json").write_text(json.dumps({"yes": 0, "no": 2}))
    with pytest.raises(ValueError, match="indices 0..n-1"):
        read_answers(tmp_path / "gap.json")


def test_inference_over_a_feature_subset_and_its_swaps(tmp_path):
    from vqarobust.context.feature_swaps import FEATURE_SWAP_SCHEMA
    from vqarobust.inference import Subset, input_fingerprint, run_inference

    path = tmp_path / "f.parquet"
    vocab = {k: np.r_[v, v].astype(np.float32) for k, v in VOCAB.items()}
    write_features(perfect_sight_table(_objects(), vocab), path, {"kind": "perfect_sight"}, vocab)
    questions = pa.table(
        {
            "question_id": [1, 2],
            "image_id": [4, 7],
            "question": ["is there a red circle?", "what color is the star?"],
            "answers": [["yes"] * 10, ["blue"] * 10],
            "question_type": ["is there", "what color"],
            "answer_type": ["yes/no", "other"],
        }
    )
    store.write_table(questions.cast(store.QUESTION_SCHEMA), tmp_path / "q.parquet")
    swaps = [
        {
            "question_id": 1,
            "perturbation": "swap_class",
            "severity": 1,
            "rank": 1,
            "image_id": 4000,
            "source_image_id": 4,
            "object_index": 1,
            "donor_image_id": None,
            "donor_object_index": None,
            "after_class": "circle",
            "after_attributes": [],
            "before": "star",
            "after": "circle",
        }
    ]
    pq.write_table(pa.Table.from_pylist(swaps, schema=FEATURE_SWAP_SCHEMA), tmp_path / "s.parquet")
    sets = pa.table(
        {
            "question_id": [1],
            "image_id": [4000],
            "original": ["is there a red circle?"],
            "perturbed": ["is there a red circle?"],
            "perturbation": ["swap_class"],
            "severity": [1],
            "changed": [True],
            "similarity": [1.0],
            "tries": [1],
        },
        schema=store.QUESTION_SET_SCHEMA,
    )
    pq.write_table(sets, tmp_path / "set.parquet")
    model = tiny_lxmert(tmp_path / "lx", dim=8)
    spec = {"family": "lxmert", "path_or_id": str(model), "device": "cpu"}
    subsets = [
        Subset("clean", 0, str(path), inputs="features"),
        Subset(
            "swap_class",
            1,
            str(path),
            "context",
            str(tmp_path / "set.parquet"),
            "features",
            str(tmp_path / "s.parquet"),
        ),
    ]
    n = run_inference(ModelRef("lx", spec), tmp_path / "q.parquet", subsets, tmp_path / "p.parquet")
    predictions = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert n == 3 and [(p["modality"], p["question_id"]) for p in predictions] == [
        ("clean", 1),
        ("clean", 2),
        ("context", 1),
    ]
    # The swap table is part of what the answers depend on.
    fingerprint = input_fingerprint("lx", spec, tmp_path / "q.parquet", subsets, 1024)
    assert fingerprint["subsets"][1]["swaps"] and "swaps" not in fingerprint["subsets"][0]
    with pytest.raises(ValueError, match="images or features"):
        run_inference(
            ModelRef("lx", spec),
            tmp_path / "q.parquet",
            [Subset("clean", 0, str(path), inputs="x")],
            tmp_path / "p2.parquet",
        )


def test_config_checks_feature_models_and_sources(tmp_path):
    from vqarobust.config import ConfigError, validate_config

    def config(**changes):
        base = {
            "dataset": {"name": "s", "adapter": "scenes"},
            "corruptions": ["snow"],
            "features": {"det": {"kind": "detector"}, "sight": {"kind": "perfect_sight"}},
            "context": {"perturbations": ["swap_class"], "k": 5},
            "models": {
                "m": {
                    "family": "lxmert",
                    "features": "det",
                    "train": {"architecture": "lxmert", "l_layers": 1},
                }
            },
        }
        base.update(changes)
        return base

    ok = validate_config(config())
    assert ok["features"]["det"]["dim"] == 64 and "dim" not in ok["features"]["sight"]
    lx = {"family": "lxmert", "path_or_id": "x"}
    for changes, message in [
        ({"models": {"m": lx}}, "models.m: family lxmert reads region features; give features"),
        (
            {"models": {"m": {**lx, "features": "nope"}}},
            "models.m.features: no feature source 'nope'",
        ),
        (
            {"models": {"m": {"family": "blip", "path_or_id": "x", "features": "det"}}},
            "models.m.features: applies to family lxmert only",
        ),
        (
            {"models": {"m": {"family": "vqa-classifier", "train": {"architecture": "lxmert"}}}},
            "train.architecture: architecture lxmert is trained for family lxmert only",
        ),
        (
            {"models": {"m": {**lx, "features": "det", "train": {"architecture": "vilt"}}}},
            "train.architecture",
        ),
        (
            {"features": {"det": {"kind": "perfect_sight", "dim": 8}}},
            "features.det.dim: applies to kind detector",
        ),
        (
            {"context": {"perturbations": ["swap_class"], "k": 5, "reliance_k": [5, 10]}},
            "context.reliance_k\\[1\\]: 10 exceeds context.k",
        ),
        ({"context": {"perturbations": ["swap_class"], "k": 11}}, "context.k"),
        (
            {
                "context": {
                    "perturbations": ["swap_class"],
                    "word_vectors": str(tmp_path / "no.txt"),
                }
            },
            "context.word_vectors: no file",
        ),
    ]:
        with pytest.raises(ConfigError, match=message):
            validate_config(config(**changes))
    with pytest.raises(ConfigError, match="features.det.kind: detector features need .*'easy-vqa'"):
        validate_config(
            config(
                dataset={"name": "e", "adapter": "easy-vqa"},
                context={"perturbations": []},
                models={"m": {**lx, "features": "det"}},
            )
        )


def test_the_feature_study_config_plans_the_papers_runs(tmp_path):
    """config/scenes-features.yaml as shipped: its DAG (a dry run) trains one detector,
    makes the feature tables, swaps features once per source and trains four LXMERTs."""
    import re

    from tests.conftest import REPO
    from tests.study_run import run_study

    out = run_study(
        REPO / "config" / "scenes-features.yaml", tmp_path, {}, "-n", "--quiet", "rules"
    )
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M))
    # Detector features of train/eval and of 5 severities + the blank control; perfect
    # sight of train/eval only (it reads no pixels); no pixel swaps (no pixel model); one
    # inference job for each of the 4 models (clean, gaussian_noise, blank, swap_class,
    # swap_attribute).
    assert {
        k: int(v)
        for k, v in counts.items()
        if k
        in (
            "train_detector",
            "extract_features",
            "extract_image_features",
            "swap_features",
            "train_model",
            "swap_context",
            "run_model",
        )
    } == {
        "train_detector": 1,
        "extract_features": 4,
        "extract_image_features": 6,
        "swap_features": 2,
        "train_model": 4,
        "run_model": 4,
    }

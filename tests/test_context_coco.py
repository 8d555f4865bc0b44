"""SwapMix on COCO images: relevance from words, swaps from instance annotations, pasting in
image space, tested on a generated VQAv2 miniature with COCO-format instances."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vqarobust import store
from vqarobust.context import coco
from vqarobust.datasets import PreparedOutputs, prepare_dataset
from vqarobust.datasets.miniature import MINI_CATEGORIES, write_mini_vqav2
from vqarobust.materialize.context import (
    CocoSources,
    SwapOutputs,
    SwapSettings,
    swap_context_coco,
)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    paths = write_mini_vqav2(root / "vqav2", n_images=12, instances=True)
    prepared = root / "prepared"
    prepare_dataset(
        "vqav2",
        PreparedOutputs(
            prepared / "q.parquet", prepared / "img", prepared / "m.txt", prepared / "i.json"
        ),
        n_images=None,
        questions=str(paths["questions"]),
        annotations=str(paths["annotations"]),
        images=str(paths["images"]),
    )
    return paths, prepared


def test_the_miniature_is_in_coco_instance_format(mini):
    paths, _ = mini
    data = json.loads(paths["instances"].read_text())
    assert {"info", "licenses", "images", "annotations", "categories"} <= set(data)
    assert {c["id"]: c["name"] for c in data["categories"]}[18] == "dog"
    for a in data["annotations"]:
        assert {"id", "image_id", "category_id", "bbox", "area", "iscrowd", "segmentation"} <= set(
            a
        )
        if a["iscrowd"]:
            assert set(a["segmentation"]) == {"counts", "size"}  # RLE
        else:
            assert len(a["segmentation"][0]) == 8  # one polygon
    by_image, categories = coco.read_instances(paths["instances"])
    assert categories == sorted(n for n, _, _ in MINI_CATEGORIES.values())
    assert any(i.crowd for items in by_image.values() for i in items)


def test_relevance_from_question_and_answer_words():
    cats = ["person", "dog", "car", "umbrella", "dining table", "potted plant", "bus"]
    assert coco.mentioned_categories(["Is there a dog in the picture?", "yes"], cats) == {"dog"}
    assert coco.mentioned_categories(["How many people are there?", "2"], cats) == {"person"}
    assert coco.mentioned_categories(["What is the man holding?", "an umbrella"], cats) == {
        "person",
        "umbrella",
    }
    assert coco.mentioned_categories(["What is on the tables?", "plants"], cats) == {
        "dining table",
        "potted plant",
    }
    # Whole words only: "carpet" and "busy" name no car and no bus.
    assert coco.mentioned_categories(["Is the carpet busy?", "no"], cats) == set()


def test_swaps_use_only_context_instances_and_unmentioned_classes():
    inst = [
        coco.Instance(1, 10, "dog", (0, 0, 50, 50), 2500, False),
        coco.Instance(2, 10, "cat", (60, 0, 50, 50), 2500, False),
        coco.Instance(3, 10, "car", (0, 60, 10, 10), 100, False),  # too small
        coco.Instance(4, 10, "person", (0, 0, 60, 40), 2400, True),
    ]  # crowd
    donors = {
        "cat": [coco.Instance(5, 11, "cat", (0, 0, 40, 40), 1600, False)],
        "dog": [coco.Instance(6, 12, "dog", (0, 0, 40, 40), 1600, False)],
        "bench": [coco.Instance(7, 13, "bench", (0, 0, 40, 40), 1600, False)],
    }
    neighbours = {"cat": ["dog", "bench", "car"]}
    swaps = coco.coco_swaps(inst, {"dog"}, neighbours, donors, 2, np.random.default_rng(0))
    assert {s.target.id for s in swaps} == {2}  # the dog is relevant; small and crowd skipped
    cls = [s for s in swaps if s.perturbation == "swap_class"]
    assert [s.donor.category for s in cls] == ["bench"]  # dog mentioned, car has no donor
    attr = [s for s in swaps if s.perturbation == "swap_attribute"]
    assert [s.donor.id for s in attr] == [5, 5] and [s.severity for s in attr] == [1, 2]


def test_every_context_instance_is_swapped_unless_capped():
    """Eight cats, largest first: all eight are swapped (the paper's rule), or the
    largest c with max_objects c, each target's swaps as without the cap."""
    inst = [coco.Instance(i, 10, "cat", (0, 0, 50, 50), 5000 - i, False) for i in range(1, 9)]
    donors = {
        "cat": [coco.Instance(20, 11, "cat", (0, 0, 40, 40), 1600, False)],
        "bench": [coco.Instance(21, 12, "bench", (0, 0, 40, 40), 1600, False)],
    }
    neighbours = {"cat": ["bench"]}

    def swaps(cap):
        return coco.coco_swaps(
            inst, set(), neighbours, donors, 1, np.random.default_rng(0), max_objects=cap
        )

    every = swaps(None)
    assert [s.target.id for s in every if s.perturbation == "swap_class"] == list(range(1, 9))
    assert max(s.severity for s in every) == 8
    three = swaps(3)
    assert [(s.perturbation, s.target.id, s.donor.id) for s in three] == [
        (s.perturbation, s.target.id, s.donor.id) for s in every if s.target.id <= 3
    ]


def test_paste_replaces_only_the_box():
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8))
    donor = Image.fromarray(rng.integers(0, 255, (50, 50, 3), dtype=np.uint8))
    out = np.asarray(coco.paste(image, (10.0, 20.0, 30.0, 15.0), donor, (5.0, 5.0, 20.0, 20.0)))
    before = np.asarray(image)
    mask = np.zeros(before.shape[:2], bool)
    mask[20:35, 10:40] = True
    assert np.array_equal(out[~mask], before[~mask])
    expected = np.asarray(donor.crop((5, 5, 25, 25)).resize((30, 15), Image.Resampling.BICUBIC))
    assert np.array_equal(out[20:35, 10:40], expected)
    with pytest.raises(ValueError, match="outside"):
        coco.paste(image, (100.0, 100.0, 5.0, 5.0), donor, (0, 0, 5, 5))


def test_coco_swaps_materialize_seeded(mini, tmp_path):
    paths, prepared = mini

    def run(out, seed=0):
        sets = {"swap_class": out / "c.parquet", "swap_attribute": out / "a.parquet"}
        sources = CocoSources(prepared / "img", paths["images"], paths["instances"])
        return swap_context_coco(
            prepared / "q.parquet",
            sources,
            SwapOutputs(out / "swaps.parquet", sets, out / "images"),
            SwapSettings(seed, k=1, max_objects=2),
        )

    counts = run(tmp_path / "a")
    assert counts["swaps"] > 0 and counts["swap_class"] > 0 and counts["swap_attribute"] > 0
    swaps = pq.read_table(tmp_path / "a" / "swaps.parquet").to_pylist()
    questions = {
        r["question_id"]: r for r in store.read_questions(prepared / "q.parquet").to_pylist()
    }
    by_image, categories = coco.read_instances(paths["instances"])
    for s in swaps:
        q = questions[s["question_id"]]
        mentioned = coco.mentioned_categories([q["question"], *q["answers"]], categories)
        assert s["before"] not in mentioned
        assert s["after"].split(" (")[0] not in mentioned
    # A swapped image differs from the clean one inside the target box only.
    s = swaps[0]
    clean = store.ImageShards(prepared / "img").read([s["source_image_id"]])[s["source_image_id"]]
    swapped = store.ImageShards(tmp_path / "a" / "images").read([s["image_id"]])[s["image_id"]]
    a, b = store.decode_image(clean).astype(int), store.decode_image(swapped).astype(int)
    target = next(i for i in by_image[s["source_image_id"]] if i.id == s["object_id"])
    x, y, w, h = (int(v) for v in target.box)
    inside = np.zeros(a.shape[:2], bool)
    inside[y : y + h, x : x + w] = True
    assert np.abs(a - b)[inside].mean() > 5 and np.abs(a - b)[~inside].max() == 0
    # Seeded: the same seed gives the same swaps, another seed other donors.
    run(tmp_path / "b")
    assert pq.read_table(tmp_path / "b" / "swaps.parquet").to_pylist() == swaps
    run(tmp_path / "c", seed=5)
    assert pq.read_table(tmp_path / "c" / "swaps.parquet").to_pylist() != swaps


def test_config_for_coco_context():
    from vqarobust.config import ConfigError, validate_config

    def vqav2(context: dict) -> dict:
        dataset = {
            "name": "v",
            "adapter": "vqav2",
            "questions": "q",
            "annotations": "a",
            "images": "i",
        }
        return {
            "dataset": dataset,
            "corruptions": ["snow"],
            "context": context,
            "models": {"m": {"family": "blip", "path_or_id": "x"}},
        }

    with pytest.raises(ConfigError, match="set context.instances"):
        validate_config(vqav2({"perturbations": ["swap_class"]}))
    ok = validate_config(vqav2({"perturbations": ["swap_class"], "instances": "x.json"}))
    assert ok["context"]["min_area"] == 1024
    scenes = {
        "dataset": {"name": "s", "adapter": "scenes"},
        "corruptions": ["snow"],
        "models": {"m": {"family": "blip", "path_or_id": "x"}},
        "context": {"instances": "x.json"},
    }
    with pytest.raises(ConfigError, match="context.instances: vqav2 only"):
        validate_config(scenes)


@pytest.mark.workflow
@pytest.mark.slow
def test_coco_context_runs_through_the_workflow(mini, checkpoints, tmp_path):
    import duckdb

    from tests.conftest import run_workflow

    paths, _ = mini
    config = {
        "dataset": {
            "name": "mini",
            "adapter": "vqav2",
            "questions": str(paths["questions"]),
            "annotations": str(paths["annotations"]),
            "images": str(paths["images"]),
            "n_images": 8,
        },
        # The swaps are what this test reads: no blank control, no attention maps, and
        # the database as the target, not the report (each read by other tests).
        "corruptions": ["gaussian_noise"],
        "severities": [2],
        "controls": [],
        "diagnostics": {"attention": {"n": 0}},
        "threads": {"infer": 1},
        "context": {
            "perturbations": ["swap_class", "swap_attribute"],
            "k": 1,
            "instances": str(paths["instances"]),
        },
        "models": {
            "vilt": {
                "family": "vqa-classifier",
                "path_or_id": str(checkpoints["vilt"]),
                "device": "cpu",
                "batch_size": 16,
            }
        },
    }
    database = Path("results", "mini", "robustness.duckdb")
    run_workflow(tmp_path, config, str(database))
    with duckdb.connect(str(tmp_path / database), read_only=True) as con:
        rows = con.sql("SELECT perturbation FROM context_reliance WHERE model = 'vilt'").fetchall()
        assert sorted(p for (p,) in rows) == ["all", "swap_attribute", "swap_class"]
        n_swaps = con.execute("SELECT count(*) FROM context_swaps").fetchone()[0]
        n_context = con.execute(
            "SELECT count(*) FROM predictions WHERE modality = 'context'"
        ).fetchone()[0]
        assert n_swaps > 0 and n_context == n_swaps

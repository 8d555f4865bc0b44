"""dataset.adapter: hf on datasets built here with the datasets library, in both layouts
(save_to_disk, Parquet shards in the hub's layout): the same questions, seeded sample and
original image bytes as the official VQAv2 files give, the bad-image policy, the column
presets, the errors, and a whole workflow run."""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import polars as pl
import pytest
import yaml

from tests.conftest import REPO
from tests.hf_data import SPLIT, vqav2_rows, write_parquet, write_saved
from tests.hf_data import features as hf_features
from vqarobust import store
from vqarobust.config import ConfigError, validate_config
from vqarobust.datasets import PreparedOutputs, dataset_job, prepare_dataset
from vqarobust.datasets.hf import column_map, load_split, open_hf
from vqarobust.datasets.miniature import image_name, write_mini_vqav2
from vqarobust.datasets.prepare import BadImagesError, read_manifest

pytest.importorskip("datasets")


def outputs(root):
    out = PreparedOutputs(
        root / "q.parquet", root / "images", root / "manifest.txt", root / "dataset.json"
    )
    return {"out": out}


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    mini = write_mini_vqav2(root / "vqav2", n_images=12)
    rows = vqav2_rows(mini)
    broken_id = sorted(set(rows["image_id"]))[2]
    return {
        "mini": mini,
        "saved": write_saved(rows, root / "saved"),
        "parquet": write_parquet(rows, root / "parquet"),
        "broken": write_parquet(vqav2_rows(mini, broken=broken_id), root / "broken", 1),
        "broken_id": broken_id,
    }


@pytest.mark.parametrize("layout", ["saved", "parquet"])
def test_both_layouts_give_what_the_official_files_give(sets, layout, tmp_path):
    mini = sets["mini"]
    kw = {"n_images": 5, "seed": 3}
    prepare_dataset(
        "vqav2",
        questions=str(mini["questions"]),
        annotations=str(mini["annotations"]),
        images=str(mini["images"]),
        **kw,
        **outputs(tmp_path / "official"),
    )
    counts = prepare_dataset(
        "hf", path=str(sets[layout]), split=SPLIT, **kw, **outputs(tmp_path / "hf")
    )
    assert counts["images"] == 5
    official = pl.read_parquet(tmp_path / "official" / "q.parquet")
    hf = pl.read_parquet(tmp_path / "hf" / "q.parquet")
    assert hf.equals(official)  # same ids, questions, 10 answers, types; same seeded sample
    assert read_manifest(tmp_path / "hf" / "manifest.txt") == read_manifest(
        tmp_path / "official" / "manifest.txt"
    )
    for r in store.iter_images(tmp_path / "hf" / "images"):  # the bytes as stored
        assert r["bytes"] == (mini["images"] / image_name(r["image_id"])).read_bytes()
    info = json.loads((tmp_path / "hf" / "dataset.json").read_text())
    assert info["adapter"] == "hf" and info["split"] == SPLIT


def test_a_saved_split_is_memory_mapped_not_loaded(sets):
    ds = load_split(str(sets["saved"]), SPLIT)
    assert ds.cache_files and all(f["filename"].endswith(".arrow") for f in ds.cache_files)


def test_a_broken_image_fails_naming_it_or_is_skipped_and_counted(sets, tmp_path):
    bad = sets["broken_id"]
    with pytest.raises(BadImagesError, match=rf"{bad} \(does not decode"):
        prepare_dataset("hf", path=str(sets["broken"]), split=SPLIT, **outputs(tmp_path / "a"))
    assert not (tmp_path / "a" / "images").exists()
    counts = prepare_dataset(
        "hf", path=str(sets["broken"]), split=SPLIT, on_bad_image="skip", **outputs(tmp_path / "b")
    )
    assert counts["skipped_images"] == 1 and counts["images"] == 11
    assert bad not in set(pl.read_parquet(tmp_path / "b" / "q.parquet")["image_id"])


def test_single_answer_preset_numbers_rows_and_distinct_images(tmp_path):
    import io

    import datasets
    import numpy as np
    from PIL import Image

    def png(value: int) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(buf, "PNG")
        return buf.getvalue()

    red, blue = png(200), png(20)
    ds = datasets.Dataset.from_dict(
        {
            "image": [{"bytes": b, "path": None} for b in (red, red, blue)],
            "question": ["What colour is it?", "Is it red?", "How many?"],
            "answer": ["red", "yes", "2"],
            "imageId": ["n1", "n1", "n2"],
        },
        features=datasets.Features(
            {
                "image": datasets.Image(),
                "question": datasets.Value("string"),
                "answer": datasets.Value("string"),
                "imageId": datasets.Value("string"),
            }
        ),
    )
    ds.save_to_disk(str(tmp_path / "one"))  # a single split, saved on its own
    by_bytes = open_hf(str(tmp_path / "one"), "test", {"preset": "single-answer"})
    q = by_bytes.questions
    assert q["question_id"].to_list() == [0, 1, 2] and q["image_id"].to_list() == [0, 0, 1]
    assert q["answers"].to_list() == [["red"], ["yes"], ["2"]]
    assert q["answer_type"].to_list() == ["other", "yes/no", "number"]
    assert by_bytes.images.read(1) == blue
    by_bytes.images.close()
    named = open_hf(
        str(tmp_path / "one"), "test", {"preset": "single-answer", "image_id": "imageId"}
    )
    assert named.questions["image_id"].to_list() == [0, 0, 1]  # strings numbered


def test_errors_name_what_is_wrong(sets, tmp_path):
    with pytest.raises(ValueError, match=r"no column 'qtype' \(for question_type\); it has "):
        open_hf(str(sets["saved"]), SPLIT, {"question_type": "qtype"})
    with pytest.raises(ValueError, match=r"no split 'test'.*\['validation'\]"):
        open_hf(str(sets["saved"]), "test")
    with pytest.raises(FileNotFoundError, match="fetched only with dataset.download: true"):
        open_hf(str(tmp_path / "nowhere"), SPLIT)
    with pytest.raises(ValueError, match="unknown 'lmms'"):
        column_map({"preset": "lmms"})
    with pytest.raises(ValueError, match=r"\['question'\] cannot be null"):
        column_map({"question": None})


def _config(dataset: dict) -> dict:
    return {
        "dataset": {"name": "x", **dataset},
        "corruptions": ["snow"],
        "text": {"perturbations": []},
        "basic_questions": {"rankers": []},
        "models": {"m": {"family": "vqa-classifier", "path_or_id": "x", "device": "cpu"}},
    }


def test_config_keys_of_the_hf_adapter():
    cfg = validate_config(
        _config(
            {
                "adapter": "hf",
                "path": "data/vqa",
                "split": "validation",
                "columns": {"preset": "single-answer"},
            }
        )
    )
    inputs, params = dataset_job(cfg["dataset"], "eval", 0)
    assert inputs == {"path": "data/vqa"}
    assert params["columns"] == {"preset": "single-answer"} and params["split"] == "validation"
    hub = validate_config(_config({"adapter": "hf", "path": "lmms-lab/VQAv2", "download": True}))
    inputs, params = dataset_job(hub["dataset"], "eval", 0)
    assert inputs == {} and params["path"] == "lmms-lab/VQAv2"  # not a file of this machine
    with pytest.raises(ConfigError, match="dataset.columns: adapter 'jsonl' does not read it"):
        validate_config(_config({"adapter": "jsonl", "path": "q.jsonl", "columns": {}}))
    with pytest.raises(ConfigError, match="columns.preset"):
        validate_config(_config({"adapter": "hf", "path": "d", "columns": {"preset": "x"}}))


@pytest.mark.workflow
@pytest.mark.slow
def test_the_workflow_runs_on_both_layouts(sets, checkpoints, tmp_path):
    config = {
        "dataset": {
            "name": "hf-vqa",
            "adapter": "hf",
            "path": str(sets["broken"]),
            "split": SPLIT,
            "on_bad_image": "skip",
        },
        "corruptions": ["gaussian_noise"],
        "severities": [1],
        "controls": [],  # the blank control is the workflow test's
        "text": {"perturbations": []},
        "basic_questions": {"rankers": []},
        "diagnostics": {"attention": {"n": 0}},
        "uncertainty": {"resamples": 50},
        "threads": {"infer": 1},
        "models": {
            "vilt": {
                "family": "vqa-classifier",
                "path_or_id": str(checkpoints["vilt"]),
                "device": "cpu",
                "batch_size": 8,
            }
        },
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "c.yaml"),
        "--replace-workflow-config",
        "--cores",
        "2",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    db = tmp_path / "results" / "hf-vqa" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        n_q = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        skipped = con.execute("SELECT image_id FROM skipped_images").fetchall()
    assert info["dataset.adapter"] == "hf" and skipped == [(sets["broken_id"],)]
    assert n_q > 0 and (tmp_path / "results" / "hf-vqa" / "report" / "index.html").exists()
    # The other layout prepares the same split (the job's own target only).
    config["dataset"]["path"] = str(sets["parquet"])
    config["dataset"]["name"] = "hf-parquet"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    target = "resources/datasets/hf-parquet/eval/questions.parquet"
    proc = subprocess.run([*cmd, target], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    every = json.loads(sets["mini"]["questions"].read_text())["questions"]
    assert pl.read_parquet(tmp_path / target).height == len(every)  # n_images null: all
    assert n_q == sum(q["image_id"] != sets["broken_id"] for q in every)


def test_images_given_as_paths_are_read_from_the_dataset_folder(sets, tmp_path):
    import datasets

    mini = sets["mini"]
    rows = vqav2_rows(mini)
    (tmp_path / "set" / "images").mkdir(parents=True)
    paths = []
    for image_id in rows["image_id"]:
        name = f"images/{image_id}.jpg"
        if not (tmp_path / "set" / name).exists():
            (tmp_path / "set" / name).write_bytes(
                (mini["images"] / image_name(image_id)).read_bytes()
            )
        paths.append(name)
    features = {
        **{k: v for k, v in hf_features().items() if k != "image"},
        "image": datasets.Value("string"),
    }
    rows["image"] = paths
    ds = datasets.Dataset.from_dict(rows, features=datasets.Features(features))
    (tmp_path / "set" / "data").mkdir()
    ds.to_parquet(str(tmp_path / "set" / "data" / f"{SPLIT}-00000-of-00001.parquet"))
    prepare_dataset(
        "hf",
        path=str(tmp_path / "set"),
        split=SPLIT,
        n_images=4,
        seed=0,
        **outputs(tmp_path / "out"),
    )
    for r in store.iter_images(tmp_path / "out" / "images"):
        assert r["bytes"] == (mini["images"] / image_name(r["image_id"])).read_bytes()
    (tmp_path / "set" / paths[0]).unlink()  # a path to nothing: a bad image, named
    with pytest.raises(BadImagesError, match="missing"):
        prepare_dataset("hf", path=str(tmp_path / "set"), split=SPLIT, **outputs(tmp_path / "out2"))

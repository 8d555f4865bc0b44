"""config/paper.yaml end to end on a generated miniature of VQAv2 (official layout, COCO
sizes, realistic answer disagreement), on the CPU with tiny models, and its plan at
3,000 images."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tests.conftest import REPO
from tests.study_run import run_study
from tests.tiny_checkpoints import tiny_blip, tiny_llava, tiny_pnp, tiny_vle
from vqarobust import store
from vqarobust.datasets.miniature import write_mini_vqav2
from vqarobust.datasets.prepare import read_manifest
from vqarobust.metrics import vqa_accuracy

pytestmark = pytest.mark.workflow
PAPER = REPO / "config" / "paper.yaml"


def snakemake(workdir: Path, override: dict, *args: str) -> str:
    return run_study(PAPER, workdir, override, *args)


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory, checkpoints):
    root = tmp_path_factory.mktemp("paper")
    # 20 images (about 110 questions) keep every answer type and the broken image.
    mini = write_mini_vqav2(root / "vqav2", n_images=20)
    broken = sorted(mini["images"].iterdir())[5]
    broken.write_bytes(b"\xff\xd8 not really a JPEG")
    blip, llava = tiny_blip(root / "blip"), tiny_llava(root / "llava")
    vle, pnp = tiny_vle(root / "vle"), tiny_pnp(root / "pnp")
    cpu = {"device": "cpu", "batch_size": 8}
    override = {
        "dataset": {
            "questions": str(mini["questions"]),
            "annotations": str(mini["annotations"]),
            "images": str(mini["images"]),
            "on_bad_image": "skip",
        },
        # One corruption at two severities: a second adds a job per model and nothing new.
        "corruptions": ["gaussian_noise"],
        "severities": [1, 3],
        "threads": {"infer": 1},
        # No attention maps: nothing here reads them; the job itself is tested for each
        # family that has them in tests/test_attention.py, the rule in the workflow test.
        "diagnostics": {"attention": {"n": 0}},
        "models": {
            "vilt": {"path_or_id": str(checkpoints["vilt"]), **cpu},
            "blip": {"path_or_id": str(blip), **cpu},
            "vle": {"path_or_id": str(vle), **cpu},
            "pnp-vqa": {**pnp, "pnp": {"block_num": 0, "num_captions": 5, "num_patches": 4}, **cpu},
            "llava-1.5-7b": {"path_or_id": str(llava), **cpu},
            "llava-1.5-13b": {"path_or_id": str(llava), **cpu},
        },
    }
    workdir = root / "run"
    workdir.mkdir()
    snakemake(workdir, override)
    return workdir, mini, broken


@pytest.mark.slow
def test_paper_config_end_to_end(paper_run):
    workdir, mini, broken = paper_run
    broken_id = int(re.search(r"(\d+)\.jpg$", broken.name).group(1))
    annotations = json.loads(mini["annotations"].read_text())["annotations"]
    n_all = len(annotations)
    n_broken = sum(a["image_id"] == broken_id for a in annotations)
    db = workdir / "results" / "vqav2-val-3000" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        n_q = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        assert n_q == n_all - n_broken
        assert con.execute("SELECT image_id FROM skipped_images").fetchall() == [(broken_id,)]
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        assert info["dataset.n_skipped_images"] == "1"
        assert info["dataset.n_skipped_questions"] == str(n_broken)
        assert info["metric"] == "vqa_accuracy"
        n_p = con.execute("SELECT count(*) FROM predictions").fetchone()[0]
        # 6 models x (clean + 1 corruption x 2 severities + the blank control)
        assert n_p == n_q * 6 * (1 + 2 + 1)
        per_model = dict(
            con.execute("SELECT model, count(*) FROM predictions GROUP BY model").fetchall()
        )
        assert per_model == {
            m: n_q * 4 for m in ("vilt", "blip", "vle", "pnp-vqa", "llava-1.5-7b", "llava-1.5-13b")
        }
        controls = con.execute("SELECT DISTINCT control FROM image_reliance").fetchall()
        assert controls == [("blank",)]
        types = con.execute("SELECT DISTINCT answer_type FROM answer_type_accuracy").fetchall()
        assert {t for (t,) in types} == {"yes/no", "number", "other"}
        # The stored score is the official one, recomputed here from the raw answers.
        rows = con.sql(
            "SELECT p.answer, q.answers, p.score FROM predictions p JOIN questions q "
            "USING (question_id) WHERE p.model = 'blip' AND p.severity = 0"
        ).fetchall()
        assert all(vqa_accuracy(a, list(ans)) == pytest.approx(s) for a, ans, s in rows)
    prepared = workdir / "resources" / "datasets" / "vqav2-val-3000" / "eval"
    manifest = read_manifest(prepared / "manifest.txt")
    assert len(manifest) == 19 and broken_id not in manifest
    # Clean images keep their original JPEG bytes; corrupted ones are stored as JPEG.
    clean = {r["image_id"]: r for r in store.iter_images(prepared / "images")}
    first = manifest[0]
    assert clean[first]["bytes"] == (mini["images"] / f"COCO_val2014_{first:012d}.jpg").read_bytes()
    noisy = workdir / "results" / "vqav2-val-3000" / "images" / "gaussian_noise" / "3"
    assert {r["format"] for r in store.iter_images(noisy)} == {"jpeg"}
    html = (workdir / "results" / "vqav2-val-3000" / "report" / "index.html").read_text()
    assert "1 image was skipped" in html and str(broken_id) in html
    assert "Accuracy per answer type" in html


@pytest.mark.slow
def test_rerun_with_the_manifest_reproduces_the_subset(paper_run, tmp_path):
    workdir, mini, _ = paper_run
    manifest = workdir / "resources" / "datasets" / "vqav2-val-3000" / "eval" / "manifest.txt"
    from vqarobust.datasets import PreparedOutputs, prepare_dataset

    out = PreparedOutputs(
        tmp_path / "q.parquet", tmp_path / "img", tmp_path / "m.txt", tmp_path / "i.json"
    )
    prepare_dataset(
        "vqav2",
        out,
        questions=str(mini["questions"]),
        annotations=str(mini["annotations"]),
        images=str(mini["images"]),
        manifest=str(manifest),
    )
    assert out.manifest.read_text().split("\n")[-10:] == manifest.read_text().split("\n")[-10:]
    a = pl.read_parquet(out.questions)
    b = pl.read_parquet(manifest.parent / "questions.parquet")
    assert a.equals(b)


def test_paper_plan_at_3000_images(tmp_path):
    mini = write_mini_vqav2(tmp_path / "vqav2", n_images=3000, images="none")
    override = {"dataset": {k: str(v) for k, v in mini.items()}}
    # The documented command (config/paper.yaml, docs/paper.md).
    out = snakemake(tmp_path, override, "-n", "--cores", "8", "--resources", "gpu=4")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.MULTILINE))
    # 70 corrupted subsets + the blank control; one job for each of 6 models (clean + 14 +
    # blank), which also draws the attention maps of the 4 that expose them (ViLT, BLIP,
    # both LLaVAs) with the same weights.
    expected = {
        "prepare_dataset": "1",
        "corrupt_images": "71",
        "run_model": "6",
        "analyze": "13",
        "load_duckdb": "1",
        "render_report": "1",
        "all": "1",
        "total": "94",
    }
    assert counts == expected
    # Each GPU job's threads are its share of the cores, 8 / 4, not threads.infer's 4:
    # the four GPUs are busy at once (tests/test_gpu_concurrency.py runs it).
    jobs = out.split("\nrule ")[1:]
    gpu_jobs = [j for j in jobs if j.startswith("run_model:")]
    assert len(gpu_jobs) == 6
    assert all(re.search(r"^    threads: 2$", j, flags=re.MULTILINE) for j in gpu_jobs)

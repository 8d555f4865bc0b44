"""config/modern.yaml: its plan at 3,000 images, and the same study shape end to end on a
VQAv2 miniature with a tiny checkpoint of each chat architecture (tests/tiny_vlms.py) in
place of each hub id, on the CPU, beside a served model (the workflow's test of the
openai-chat family)."""

from __future__ import annotations

import math
import re

import duckdb
import pytest
import yaml

from tests.conftest import REPO
from tests.study_run import run_study
from tests.tiny_vlms import BUILDERS
from vqarobust.datasets.miniature import write_mini_vqav2
from vqarobust.export import sample_records
from vqarobust.models.postprocess import short_answer

pytestmark = pytest.mark.workflow
MODERN = REPO / "config" / "modern.yaml"
# Each study entry and the tiny architecture that stands in for it.
STAND_INS = {
    "qwen2-vl-2b": "qwen2-vl",
    "qwen2.5-vl-3b": "qwen2.5-vl",
    "qwen3-vl-2b": "qwen3-vl",
    "smolvlm-256m": "smolvlm",
    "idefics3-8b": "idefics3",
    "llava-onevision-0.5b": "llava-onevision",
    "paligemma2-3b-mix-224": "paligemma2",
    "gemma-3-4b-it": "gemma3",
}


def test_the_study_lists_one_checkpoint_per_tested_architecture():
    study = yaml.safe_load(MODERN.read_text())
    assert set(study["models"]) == set(STAND_INS)
    assert set(STAND_INS.values()) == set(BUILDERS)


def test_modern_plan_at_3000_images_requests_the_estimated_gpu_memory(tmp_path, monkeypatch):
    """The study plans 16 jobs per model; a GPU entry with gpu_memory_gb: auto requests
    its checkpoint's estimate (a tiny local one here), the hub ids not in the cache none."""
    from vqarobust.models.memory import estimate_checkpoint

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    mini = write_mini_vqav2(tmp_path / "vqav2", n_images=3000, images="none")
    tiny = BUILDERS["qwen2.5-vl"](tmp_path / "qwen")
    override = {
        "dataset": {k: str(v) for k, v in mini.items()},
        "models": {"qwen2.5-vl-3b": {"path_or_id": str(tiny)}},
    }
    out = run_study(MODERN, tmp_path, override, "-n", "--forceall")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.MULTILINE))
    assert counts["corrupt_images"] == "71"
    assert counts["run_model"] == "8"  # one job per model, its 16 subsets in it
    # No chat architecture exposes its attention: no model's job has an attention table.
    assert "/attention/" not in out and "image_attention" not in counts
    expected = math.ceil(estimate_checkpoint(str(tiny), batch_size=16).total_gb)
    requested = set(re.findall(r"gpu_memory_gb=(\d+)", out))
    assert requested == {str(expected), "0"}
    assert "gpu_memory_gb is auto but Qwen/Qwen3-VL-2B-Instruct is not in the local cache" in out


@pytest.fixture(scope="module")
def modern_run(tmp_path_factory):
    """The study on a 3-image miniature, each hub entry replaced by its tiny stand-in,
    beside a served model (the tiny LLaVA behind a chat-completions server on
    127.0.0.1), as vLLM would serve one of today's models."""
    from tests.chat_server import ChatServer
    from tests.tiny_checkpoints import tiny_llava
    from vqarobust.models import load_model

    root = tmp_path_factory.mktemp("modern")
    mini = write_mini_vqav2(root / "vqav2", n_images=3)
    cpu = {"device": "cpu", "dtype": "float32", "batch_size": 8, "max_new_tokens": 4}
    models = {
        name: {"path_or_id": str(BUILDERS[arch](root / arch.replace(".", "_"))), **cpu}
        for name, arch in STAND_INS.items()
    }
    llava = load_model(
        {
            "family": "llava",
            "path_or_id": str(tiny_llava(root / "llava")),
            "prompt": "{question}",
            "max_new_tokens": 4,
        },
        device="cpu",
    )
    # A short delay per request, so that concurrent requests overlap on the server.
    with ChatServer(lambda image, text: llava.answer([image], [text])[0], delay_s=0.05) as server:
        # A fixed limit of 4 per job, so that the server's count can be checked.
        models["served"] = {
            "family": "openai-chat",
            "base_url": server.base_url,
            "model": "tiny-llava",
            "max_new_tokens": 4,
            "max_concurrency": 4,
            "adaptive_concurrency": False,
        }
        override = {
            "dataset": {
                "questions": str(mini["questions"]),
                "annotations": str(mini["annotations"]),
                "images": str(mini["images"]),
            },
            "corruptions": ["gaussian_noise"],
            "severities": [3],
            "controls": [],
            "threads": {"infer": 1},
            "models": models,
        }
        workdir = root / "run"
        workdir.mkdir()
        run_study(MODERN, workdir, override)
    return workdir, server


@pytest.mark.slow
def test_modern_study_end_to_end_keeps_raw_replies(modern_run):
    workdir, server = modern_run
    db = workdir / "results" / "vqav2-val-3000" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        n_q = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        per_model = dict(
            con.execute("SELECT model, count(*) FROM predictions GROUP BY model").fetchall()
        )
        rows = con.execute("SELECT answer, raw_answer FROM predictions").fetchall()
        served = con.execute(
            "SELECT DISTINCT modality FROM accuracy WHERE model = 'served'"
        ).fetchall()
    # clean and gaussian_noise at severity 3
    assert per_model == {name: 2 * n_q for name in [*STAND_INS, "served"]}
    assert all(raw is not None and answer == short_answer(raw) for answer, raw in rows)
    records = sample_records(db)
    assert records.columns.index("raw_prediction") + 1 == records.columns.index("prediction")
    assert records["raw_prediction"].null_count() == 0
    html = (workdir / "results" / "vqav2-val-3000" / "report" / "index.html").read_text()
    assert all(name in html for name in STAND_INS)
    # The served model: one request per question and subset, and its job's one probe of
    # who answers; the limit holds per job (one per model), and two run_model jobs run at
    # once with --cores 2.
    assert {m for (m,) in served} == {"clean", "image"}
    assert server.requests == 2 * n_q + 1
    assert 4 <= server.max_in_flight <= 2 * 4

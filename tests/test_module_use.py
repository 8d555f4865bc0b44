"""vqarobust pulled into a workflow of one's own as a Snakemake module, with a prefix and
its config under a key of the consumer's config (tests/module_use/Snakefile, the example
of docs/workflow.md): rules, paths, schema validation, package data, a step of the
consumer after it and its report message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.workflow
CONSUMER = REPO / "tests" / "module_use" / "Snakefile"


def _run(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump({"vqarobust": config}))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(CONSUMER),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def tiny() -> dict:
    """The tiny config cut to what a module run needs to show (tests/test_workflow.py runs
    the whole of it): one trained model, one corruption at one severity, one text
    perturbation (no WordNet), no basic questions."""
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    config.update(
        corruptions=["gaussian_noise"],
        severities=[1],
        text={"perturbations": ["keyboard"]},
        basic_questions={"rankers": []},
        uncertainty={"resamples": 50},
    )
    config["models"] = {"cnn-bow": config["models"]["cnn-bow"]}
    return config


@pytest.mark.slow
def test_the_module_runs_end_to_end_under_its_prefix(tiny, tmp_path):
    proc = _run(tmp_path, tiny)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    prefix = tmp_path / "vqarobust"
    # Every file of vqarobust lands under the prefix; the consumer's own next to it.
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "config.yaml",
        "vqarobust",
        "vre.txt",
    ]
    report = prefix / "results" / "easy-vqa" / "report" / "index.html"
    assert report.exists() and "VQA robustness report" in report.read_text()
    assert "Report: vqarobust/results/easy-vqa/report/index.html" in out
    assert "vqarobust_run_model" in out and "vqarobust_render_report" in out  # prefixed rules
    with duckdb.connect(
        str(prefix / "results" / "easy-vqa" / "robustness.duckdb"), read_only=True
    ) as con:
        vre = con.execute(
            "SELECT model, vre FROM vre_model WHERE modality = 'image' ORDER BY model"
        ).fetchall()
    lines = (tmp_path / "vre.txt").read_text().splitlines()
    assert lines == [f"{m}\t{v:.6f}" for m, v in vre] and len(lines) == 1
    # Nothing left to do on a rerun; the aggregation rules stay local under their new names.
    again = _run(tmp_path, tiny)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert "localrules directive specifies rules that are not present" not in out


def test_the_schema_validates_the_module_config(tiny, tmp_path):
    bad = {**tiny, "severitys": [1]}
    proc = _run(tmp_path, bad, "-n")
    assert proc.returncode != 0
    assert (
        "config error at (top level): 'severitys' was unexpected; did you mean "
        "'severities'?" in proc.stdout + proc.stderr
    )


def test_files_the_config_names_are_not_prefixed(tiny, tmp_path):
    """Data the module's config points at is the consumer's own (relative to its working
    directory); only what vqarobust writes goes under the prefix."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "q.jsonl").write_text(
        '{"image": "a.png", "question": "What colour?", "answers": ["red"]}\n'
    )
    model = {"family": "vqa-classifier", "path_or_id": "ckpt", "device": "cpu"}
    config = {
        **tiny,
        "dataset": {"name": "mine", "adapter": "jsonl", "path": "data/q.jsonl"},
        "basic_questions": {"rankers": []},
        "models": {"v": model},
    }
    proc = _run(tmp_path, config, "-n")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    block = proc.stdout.split("rule vqarobust_prepare_dataset:")[1].split("\n\n")[0]
    assert "input: data/q.jsonl" in block
    assert "output: vqarobust/resources/datasets/mine/eval/questions.parquet" in block

"""lmms-eval itself on this workflow's subsets, and its answers back through the analyses.

The tiny run's subsets are exported (``vqarobust hf-export``); lmms-eval 0.7.3, in a venv
of its own (tests/harness_venv.py), runs its Qwen2-VL adapter on a tiny Qwen2-VL the test
builds, on the CPU, over every exported task with ``--log_samples``; the study then adds
those logs as a model of family ``imported`` and runs through the workflow. The imported
accuracy of each subset is lmms-eval's own aggregate (both scored with lmms-eval's
normalization, ``scoring.metric: vqa_accuracy_both``), and the report's tables carry the
imported model's VRE with intervals.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
import yaml

from tests.harness_samples import DATE, logs_from_predictions
from tests.harness_venv import lmms_eval_python
from tests.plans import plan, snakemake, write_config
from tests.tiny_vlms import tiny_qwen2_vl
from vqarobust.harness_logs import lmms_eval_results, task_name

pytestmark = [pytest.mark.workflow, pytest.mark.slow]
# The harness venv's first build (~2 min) and lmms-eval's run, then the study's rerun.
COST_SECONDS = 300


@pytest.fixture(scope="module")
def round_trip(workflow_run, tmp_path_factory) -> dict[str, Path]:
    """The tiny run exported, answered by lmms-eval, and imported into a copy of the run,
    in the same workflow run as a second imported model whose logs hold vilt-tiny's own
    answers (tests/harness_samples.py)."""
    source, config = workflow_run
    root = tmp_path_factory.mktemp("lmms")
    workdir = root / "wf"
    shutil.copytree(source, workdir, symlinks=True)
    exported = root / "dataset"
    cli = [sys.executable, "-m", "vqarobust.cli", "hf-export", "results/easy-vqa"]
    subprocess.run([*cli, "--out", str(exported)], cwd=workdir, check=True, timeout=600)
    model = tiny_qwen2_vl(root / "tiny-qwen2-vl")
    logs = root / "logs"
    # One new token: the tiny model's words, some of them easy-VQA's answers.
    lmms = [str(lmms_eval_python()), "-m", "lmms_eval", "eval", "--model", "qwen2_vl"]
    lmms += ["--model_args", f"pretrained={model},device=cpu,device_map=cpu"]
    lmms += ["--tasks", "vqarobust", "--include_path", str(exported / "lmms_eval_tasks")]
    lmms += ["--batch_size", "8", "--gen_kwargs", "max_new_tokens=1", "--log_samples"]
    lmms += ["--output_path", str(logs)]
    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run(lmms, env=offline, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    vilt_logs = root / "vilt-logs" / "vilt-tiny"
    predictions = workdir / "results" / "easy-vqa" / "predictions" / "vilt-tiny"
    assert logs_from_predictions(predictions, vilt_logs) >= 10
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed["models"]["qwen-lmms"] = {
        "family": "imported",
        "logs": str(logs),
        "exported": str(exported),
    }
    changed["models"]["vilt-import"] = {"family": "imported", "logs": str(vilt_logs.parent)}
    # A blank reply of the tiny model is counted apart (status empty), not a failure.
    scoring = {"metric": "vqa_accuracy_both", "on_failed_answers": "skip"}
    changed["scoring"] = {**changed.get("scoring", {}), **scoring}
    write_config(workdir, changed)
    planned = plan(workdir)
    snakemake(workdir)
    return {
        "workdir": workdir,
        "exported": exported,
        "logs": logs,
        "vilt_logs": vilt_logs,
        "planned": planned,
    }


def _samples(logs: Path) -> dict[str, list[dict]]:
    out = {}
    for path in logs.rglob("*_samples_*.jsonl"):
        task = path.stem.split("_samples_", 1)[1]
        out[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def test_lmms_eval_logs_every_exported_question_with_its_identity(round_trip):
    exported, samples = round_trip["exported"], _samples(round_trip["logs"])
    card = yaml.safe_load((exported / "README.md").read_text().split("---")[1])
    configs = [c["config_name"] for c in card["configs"]]
    assert len(samples) == len(configs) >= 10
    for name in configs:
        rows = pq.read_table(exported / "data" / name).to_pylist()
        perturbation, severity = rows[0]["perturbation"], rows[0]["severity"]
        logged = sorted(samples[task_name(perturbation, severity)], key=lambda s: s["doc_id"])
        ids = [s["vqarobust_sample"]["question_id"] for s in logged]
        assert ids == [r["question_id"] for r in rows], name
        assert {
            (s["vqarobust_sample"]["perturbation"], s["vqarobust_sample"]["severity"])
            for s in logged
        } == {(perturbation, severity)}


def test_imported_accuracy_is_lmms_evals_aggregate(round_trip):
    """Per subset, the workflow's accuracy of the imported answers times its answered
    questions is lmms-eval's mean score times all its questions: lmms-eval scores a blank
    reply 0, the workflow counts it apart (status empty) and scores only answers."""
    samples = _samples(round_trip["logs"])
    aggregates = lmms_eval_results(round_trip["logs"])
    db = round_trip["workdir"] / "results" / "easy-vqa" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        accuracy = con.sql(
            "SELECT perturbation, severity, n, accuracy FROM accuracy WHERE model = 'qwen-lmms'"
        ).fetchall()
        empty = dict(
            con.sql(
                "SELECT perturbation || '-' || severity, empty FROM answer_status "
                "WHERE model = 'qwen-lmms'"
            ).fetchall()
        )
    assert len(accuracy) == len(samples)
    scored_any = False
    for perturbation, severity, n, acc in accuracy:
        task = task_name(perturbation, severity)
        logged = samples[task]
        blanks = sum(not s["filtered_resps"].strip() for s in logged)
        assert empty[f"{perturbation}-{severity}"] == blanks
        assert n + blanks == len(logged)
        mean = aggregates[task]["exact_match,none"]
        assert acc * n == pytest.approx(mean * len(logged)), task
        scored_any |= acc > 0
    assert scored_any  # a test of equal zeros would prove nothing


def test_the_report_holds_the_imported_models_vre_with_intervals(round_trip):
    results = round_trip["workdir"] / "results" / "easy-vqa"
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        rows = con.sql(
            "SELECT modality, low, high FROM intervals "
            "WHERE model = 'qwen-lmms' AND metric = 'vre_model'"
        ).fetchall()
    assert rows and all(low <= high for _, low, high in rows)
    assert "qwen-lmms" in (results / "report" / "index.html").read_text()


def test_an_imported_model_holding_vilts_answers_is_vilt_in_every_table(round_trip):
    """The model of family imported whose logs hold vilt-tiny's answers: one run_model
    job per imported model (no attention or training job), and its accuracy per subset,
    sub-metrics, VRE and bootstrap intervals are vilt-tiny's; the report shows it. A
    rewritten log reruns its import alone."""
    planned = round_trip["planned"]
    assert planned["run_model"] == 2, planned  # qwen-lmms and vilt-import
    assert "train_model" not in planned
    workdir = round_trip["workdir"]
    # An imported model has no attention: its job writes the marked empty table.
    from vqarobust.attention import NO_ATTENTION

    for model in ("qwen-lmms", "vilt-import"):
        table = pq.read_table(workdir / "results" / "easy-vqa" / "attention" / f"{model}.parquet")
        assert table.num_rows == 0 and table.schema.metadata == NO_ATTENTION
    db = workdir / "results" / "easy-vqa" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        for table, columns in (
            ("accuracy", "modality, perturbation, severity, n, accuracy"),
            ("submetrics", "* EXCLUDE (model)"),
            ("vre_model", "* EXCLUDE (model)"),
            # One resample of the questions for every model: the same answers, the same
            # intervals.
            ("intervals", "* EXCLUDE (model)"),
        ):
            rows = {
                m: con.sql(
                    f"SELECT {columns} FROM {table} WHERE model = '{m}' ORDER BY ALL"
                ).fetchall()
                for m in ("vilt-tiny", "vilt-import")
            }
            assert rows["vilt-tiny"] and rows["vilt-tiny"] == rows["vilt-import"], table
        n = "SELECT count(*) FROM intervals WHERE model = 'vilt-import' AND metric = 'vre_model'"
        assert con.sql(n).fetchall()[0][0] > 0  # one per modality
    report = workdir / "results" / "easy-vqa" / "report" / "index.html"
    assert "vilt-import" in report.read_text()
    # Another answer in one log: the import reruns, and nothing else of the models.
    clean = round_trip["vilt_logs"] / f"{DATE}_samples_vqarobust_clean_0.jsonl"
    lines = clean.read_text().splitlines()
    clean.write_text(
        "\n".join([json.dumps({**json.loads(lines[0]), "filtered_resps": "x"}), *lines[1:]]) + "\n"
    )
    assert plan(workdir)["run_model"] == 1

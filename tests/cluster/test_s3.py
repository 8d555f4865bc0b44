"""A small workflow with every input and output on S3: moto's S3 server (moto[server])
on 127.0.0.1, snakemake-storage-plugin-s3 as the default storage provider. The run is
SIGKILLed as a whole process group during inference, unlocked and rerun to the end; the
bucket then holds every output of the same config run locally, a second run plans
nothing, and the DuckDB tables equal the local run's. docs/cloud.md describes the setup.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.cluster.s3_server import client, s3_server, storage_args
from tests.conftest import REPO, run_workflow

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[dev]')")
pytest.importorskip(
    "snakemake_storage_plugin_s3",
    reason="snakemake-storage-plugin-s3 is not installed (pip install -e '.[dev]')",
)
pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[dev]')")

BUCKET, PREFIX = "vqarobust", "runs/small"
# A small run locally, the same on the bucket with its killed start, and a dry run, each
# job on the bucket paying its transfers: the suite starts this file early
# (tests/conftest.py, file_seconds).
COST_SECONDS = 400


def small_config() -> dict:
    """The tiny config with one model (cnn-bow: no attention job), one text perturbation
    and no basic questions: every kind of file (datasets, a checkpoint, image and question
    subsets, predictions with their chunks, tables, the database, the report) at about
    half the jobs. Each job on the bucket pays its transfers and the storage plugin's
    checks, and the run is made twice (here and locally), so the tiny config's second
    model and its basic-question jobs would add kinds already covered."""
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    del config["models"]["vilt-tiny"]
    config["text"]["perturbations"] = ["keyboard"]
    config["basic_questions"]["rankers"] = []
    return config


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """The same config run locally, uninterrupted: the run the bucket's is compared with."""
    workdir = tmp_path_factory.mktemp("local-run")
    run_workflow(workdir, small_config())
    return workdir


@pytest.fixture(scope="module")
def s3_url(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("moto") / "server.log", BUCKET) as url:
        yield url


def snakemake_cmd(workdir: Path, url: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *storage_args(url, f"s3://{BUCKET}/{PREFIX}"),
        *args,
    ]


def run(workdir: Path, url: str, *args: str) -> str:
    proc = subprocess.run(
        snakemake_cmd(workdir, url, *args), capture_output=True, text=True, timeout=1200
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def bucket_keys(url: str) -> set[str]:
    """Every key under PREFIX, relative to it."""
    pages = client(url).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX)
    return {o["Key"].removeprefix(f"{PREFIX}/") for page in pages for o in page.get("Contents", [])}


@pytest.fixture(scope="module")
def bucket_run(s3_url, tmp_path_factory):
    """The small config run on the bucket, SIGKILLed once its first inference chunk is
    written, unlocked and rerun to the end; its working directory (config only, and
    Snakemake's local copies) and whether the kill came before the end."""
    workdir = tmp_path_factory.mktemp("s3-run")
    (workdir / "config").mkdir()
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(small_config()))
    copies = workdir / ".snakemake" / "storage" / "s3" / BUCKET / PREFIX
    predictions = copies / "results" / "easy-vqa" / "predictions"
    proc = subprocess.Popen(
        snakemake_cmd(workdir, s3_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    killed = False
    deadline = time.monotonic() + 900
    while proc.poll() is None and time.monotonic() < deadline:
        if any(predictions.glob("*/*.chunks/*.parquet")):
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.05)
    proc.wait()
    run(workdir, s3_url, "--unlock")
    run(workdir, s3_url, "--rerun-incomplete")
    return workdir, killed


def local_outputs(workdir: Path) -> set[str]:
    """The files a local run wrote under results/ and resources/, without the inference
    chunks (kept beside each output on the job's own disk: docs/cloud.md) and Snakemake's
    directory markers."""
    found = set()
    for top in ("results", "resources"):
        for path in (workdir / top).rglob("*"):
            rel = path.relative_to(workdir)
            if path.is_file() and not any(p.endswith(".chunks") for p in rel.parts):
                found.add(rel.as_posix())
    return {f for f in found if not f.endswith(".snakemake_timestamp")}


def test_the_bucket_holds_every_output_of_a_local_run(bucket_run, local_run, s3_url):
    workdir, killed = bucket_run
    assert killed, "the run finished before its first inference chunk: nothing was killed"
    keys = bucket_keys(s3_url)
    expected = local_outputs(local_run)
    assert "results/easy-vqa/report/index.html" in expected
    assert len(expected) > 100
    assert sorted(expected - keys) == []
    # Nothing of the run is written beside the config but Snakemake's own folder.
    assert sorted(p.name for p in workdir.iterdir()) == [".snakemake", "config"]


def test_a_second_run_on_the_bucket_plans_nothing(bucket_run, s3_url):
    workdir, _ = bucket_run
    out = run(workdir, s3_url, "-n")
    assert "Nothing to be done" in out, out[-3000:]


def test_the_tables_equal_an_uninterrupted_local_run(bucket_run, local_run, s3_url, tmp_path):
    from vqarobust.provenance import diff

    local = local_run
    database = tmp_path / "robustness.duckdb"
    key = f"{PREFIX}/results/easy-vqa/robustness.duckdb"
    client(s3_url).download_file(BUCKET, key, str(database))
    result = diff(local / "results" / "easy-vqa" / "robustness.duckdb", database)
    assert result["tables"] == {} and not result["only_in_a"] and not result["only_in_b"]

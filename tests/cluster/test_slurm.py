"""Submit the tiny workflow to a real one-node SLURM through profiles/slurm and check
that what its jobs computed equals the session's local tiny run, row for row.

``local_slurm.sh`` installs Debian's slurm-wlm and munge when absent (root and the Debian
registry needed; otherwise the test is skipped with the reason), starts the daemons and
stops them afterwards. Run alone with ``pytest -m slurm``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.workflow, pytest.mark.slow]

SCRIPT = REPO / "tests" / "cluster" / "local_slurm.sh"
# The tables of per-question rows and of per-(model, subset) metrics, with the columns
# that say which rows the cluster run holds: the local run's rows with the same values
# there must be the cluster run's rows. (The tables over models or over the whole
# perturbation suite, VRE and MMI, are computed by local rules from these rows; the
# cluster run has fewer models and perturbations than the local one, so they differ.)
TABLES = {
    "predictions": ("model", "modality", "perturbation", "severity"),
    "question_sets": ("perturbation",),
    "accuracy": ("model", "modality", "perturbation", "severity"),
    "answer_type_accuracy": ("model", "modality", "perturbation", "severity"),
    "question_type_accuracy": ("model", "modality", "perturbation", "severity"),
    "image_reliance": ("model",),
}


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    if not shutil.which("slurmctld") and (os.geteuid() != 0 or not shutil.which("apt-get")):
        pytest.skip("SLURM is not installed and cannot be installed here (needs root and apt)")
    state = tmp_path_factory.mktemp("slurm")
    proc = subprocess.run(
        [str(SCRIPT), "start", str(state)], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        logs = "\n".join(p.read_text()[-2000:] for p in (state / "log").glob("*.log"))
        pytest.fail(f"local SLURM did not start:\n{proc.stdout}\n{proc.stderr}\n{logs}")
    cpu, gpu = proc.stdout.strip().splitlines()[-1].split()
    yield {"cpu": cpu, "gpu": gpu}
    subprocess.run([str(SCRIPT), "stop", str(state)], timeout=60, check=False)
    # A client config left pointing at the stopped controller costs every later
    # `snakemake` call about 9 s (local_slurm.sh, unlink_config).
    assert not any(
        Path("/etc/slurm", n).resolve() == state.resolve() / n for n in ("slurm.conf", "gres.conf")
    )


def cluster_profile(folder: Path, partitions: dict[str, str]) -> Path:
    """profiles/slurm with its placeholders (and CPUs per GPU) set for the local cluster:
    the shipped partitions.yaml with the local CPU and GPU partitions' names (the node
    has one GPU)."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    del profile["default-resources"]["slurm_account"]  # no accounting database here
    for rule in ("run_model", "image_attention"):
        profile["set-resources"][rule]["cpus_per_gpu"] = 1  # the local node has 2 CPUs
    shipped = yaml.safe_load((REPO / "profiles" / "slurm" / "partitions.yaml").read_text())
    names = {
        "SET-YOUR-CPU-PARTITION": partitions["cpu"],
        "SET-YOUR-GPU-PARTITION": partitions["gpu"],
    }
    local = {names[k]: v for k, v in shipped["partitions"].items()}
    local[partitions["gpu"]]["max_gpu"] = 1
    folder.mkdir()
    (folder / "partitions.yaml").write_text(yaml.safe_dump({"partitions": local}))
    profile["slurm-partition-config"] = str(folder / "partitions.yaml")
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder


def run(workdir: Path, *args: str) -> str:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    return out


def rows(cluster: Path, local: Path, table: str, keys: tuple[str, ...]) -> tuple:
    """``table`` of the cluster run's database, and the local run's rows that share its
    values of ``keys``, both sorted."""
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{cluster}' AS c (READ_ONLY)")
        con.execute(f"ATTACH '{local}' AS l (READ_ONLY)")
        match = " AND ".join(f"k.{key} = t.{key}" for key in keys)
        ours = con.sql(f"SELECT * FROM c.{table} ORDER BY ALL").pl()
        same = f"EXISTS (SELECT 1 FROM c.{table} AS k WHERE {match})"
        theirs = con.sql(f"SELECT * FROM l.{table} AS t WHERE {same} ORDER BY ALL").pl()
    return ours, theirs


def test_tiny_workflow_on_slurm_equals_a_local_run(partitions, tmp_path, request):
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    # vilt-tiny asks for a GPU: its inference and attention jobs go through --gpus to the
    # node's (fake) GPU and, finding no CUDA there, run on the CPU as device: auto allows.
    config["models"]["vilt-tiny"]["device"] = "auto"
    # One text perturbation (a question-set job, grouped) and no ranker: the basic-question
    # jobs are ordinary jobs, which the workflow test runs; here they would double the time.
    config["text"]["perturbations"] = ["keyboard"]
    config["basic_questions"]["rankers"] = []
    # One model: a second adds jobs of the kinds already submitted (the workflow test runs
    # both), and every submitted job pays a Snakemake start on the node.
    del config["models"]["cnn-bow"]
    workdir = tmp_path / "slurm"
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    profile = cluster_profile(tmp_path / "profile", partitions)
    out = run(
        workdir,
        "--profile",
        str(profile),
        "--slurm-no-account",
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "1",
    )
    submitted = re.findall(r"Job (\S+) has been submitted with SLURM jobid (\d+)", out)
    # prepare x2, train, run_model x5 (clean, 2 corruptions, blank, keyboard),
    # image_attention, one group job for the five corruption jobs and one for
    # perturb_questions; the analyses, load_duckdb, render_report and all are local rules.
    assert len(submitted) == 11, (len(submitted), out[-6000:])
    assert "--gpus=1" in out or "gpu=1" in out, out[-6000:]
    # Each job went to the partition its resources fit: the GPU jobs (inference and the
    # attention maps, not only run_model) to the GPU partition, the others to the CPU one.
    placed = re.findall(r"Auto-selected partition '(\S+)' for job (\S+)", out)
    gpu_rules = {"run_model", "image_attention"}
    assert {rule for _, rule in placed} >= {"prepare_dataset", "train_model", *gpu_rules}, out
    for partition, rule in placed:
        wanted = partitions["gpu"] if rule in gpu_rules else partitions["cpu"]
        assert partition == wanted, (rule, partition)
    logs = list((workdir / "logs").rglob("*.log"))
    assert any("running on the CPU (device: auto)" in p.read_text() for p in logs)
    # The local run: the tiny config, whose vilt-tiny trains and answers as here, run once
    # for the session (asked for only now, so that the other worker builds it meanwhile).
    local, _ = request.getfixturevalue("workflow_run")
    database = Path("results", "easy-vqa", "robustness.duckdb")
    cluster = {}
    for table, keys in TABLES.items():
        cluster[table], theirs = rows(workdir / database, local / database, table, keys)
        assert cluster[table].height > 0 and cluster[table].equals(theirs), table
    predictions = cluster["predictions"]
    assert set(predictions["model"]) == {"vilt-tiny"}
    assert set(predictions["modality"]) == {"clean", "image", "text"}

"""Submit the tiny workflow, with a plugin's corruption, to a real one-node SLURM through
the shipped profiles/slurm, unedited, and a user-level profile after it that sets the
account and the partitions (made from profiles/slurm-site.example); check that what its
jobs computed equals the session's local tiny run, row for row.

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
import polars as pl
import pytest
import yaml

from tests.conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.workflow, pytest.mark.slow]
# Mostly waiting on SLURM's polling: started first beside the S3 run, which builds the
# session's tiny run that this test reads only at its end (tests/conftest.py).
COST_SECONDS = 450

SCRIPT = REPO / "tests" / "cluster" / "local_slurm.sh"
EXAMPLE = REPO / "examples" / "plugin"
# An account name of the site profile's: the local cluster has no accounting database,
# so the plugin cannot check it and sbatch takes it as given (-A).
ACCOUNT = "vqarobust-test"
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


def site_profile(folder: Path, partitions: dict[str, str]) -> Path:
    """The user-level profile that goes after the shipped profiles/slurm: the example
    profiles/slurm-site.example with its account and its two partitions set for the
    local cluster (the node has one GPU)."""
    site = REPO / "profiles" / "slurm-site.example"
    profile = yaml.safe_load((site / "config.yaml").read_text())
    profile["default-resources"]["slurm_account"] = ACCOUNT
    shipped = yaml.safe_load((site / "partitions.yaml").read_text())["partitions"]
    local = {partitions["cpu"]: shipped["cpu"], partitions["gpu"]: {**shipped["gpu"], "max_gpu": 1}}
    folder.mkdir()
    (folder / "partitions.yaml").write_text(yaml.safe_dump({"partitions": local}))
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder


def run(workdir: Path, env: dict[str, str], *args: str) -> str:
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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
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
    # A plugin's corruption (the example plugin's vignette), which the jobs on the node
    # import as the workflow did: the module reaches them on the shared filesystem, here
    # through PYTHONPATH, which sbatch passes on (--export=ALL).
    config["plugins"] = ["vqarobust_example.corruptions"]
    config["corruptions"] = [*config["corruptions"], "vignette"]
    workdir = tmp_path / "slurm"
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLE / "src"), env.get("PYTHONPATH", "")])
    # The shipped profile unedited, then the user-level one with the account and the
    # partitions (docs/paper.md, "SLURM").
    site = site_profile(tmp_path / "site", partitions)
    # The database, which this test reads, is the target: the report is a local rule's
    # (render_report), read by the workflow test.
    database = Path("results", "easy-vqa", "robustness.duckdb")
    out = run(
        workdir,
        env,
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--profile",
        str(site),
        # No accounting database here: job states come from squeue, not sacct.
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "1",
        str(database),
    )
    # The site profile's account reached the plugin, which cannot check it here (no
    # accounting database) and submits with it; it guessed none.
    assert f"results for account '{ACCOUNT}'. Proceeding without account validation" in out
    assert "No SLURM account given" not in out
    submitted = re.findall(r"Job (\S+) has been submitted with SLURM jobid (\d+)", out)
    # prepare x2, train, run_model x6 (clean, 3 corruptions, blank, keyboard),
    # image_attention, one group job for the seven corruption jobs and one for
    # perturb_questions; the analyses and load_duckdb are local rules.
    assert len(submitted) == 12, (len(submitted), out[-6000:])
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
    cluster = {}
    for table, keys in TABLES.items():
        cluster[table], theirs = rows(workdir / database, local / database, table, keys)
        if "perturbation" in keys:  # the plugin's corruption is the cluster run's alone
            plugin = cluster[table].filter(pl.col("perturbation") == "vignette")
            assert table == "question_sets" or plugin.height > 0, table
            cluster[table] = cluster[table].filter(pl.col("perturbation") != "vignette")
        assert cluster[table].height > 0 and cluster[table].equals(theirs), table
    predictions = cluster["predictions"]
    assert set(predictions["model"]) == {"vilt-tiny"}
    assert set(predictions["modality"]) == {"clean", "image", "text"}
    # The plugin corruption's subsets were made and answered on the cluster, as many
    # predictions at each severity as on the clean images.
    with duckdb.connect(str(workdir / database), read_only=True) as con:
        counts = con.sql(
            "SELECT perturbation, severity, count(*) FROM predictions "
            "WHERE perturbation IN ('clean', 'vignette') GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    n_clean = counts[0][2]
    assert counts == [("clean", 0, n_clean), ("vignette", 1, n_clean), ("vignette", 3, n_clean)]

"""Each cloud profile (profiles/kubernetes, profiles/aws-batch, profiles/googlebatch)
dry-run on the tiny config with its executor plugin installed (Google Batch's apart, from
envs/googlebatch.txt, first on PYTHONPATH), its storage prefix set on the command line to
a bucket of a local moto S3 server: the plan's resources per job are what the rules and the
profile ask for. Nothing is submitted (docs/cloud.md)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.cluster.s3_server import s3_server, storage_args
from tests.conftest import REPO

pytestmark = pytest.mark.workflow

for module in ("boto3", "snakemake_storage_plugin_s3", "moto.server"):
    pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[dev]')")

BUCKET = "vqarobust-dry"
PLUGINS = {
    "kubernetes": "snakemake_executor_plugin_kubernetes",
    "aws-batch": "snakemake_executor_plugin_aws_batch",
    "googlebatch": "snakemake_executor_plugin_googlebatch",
}
# Plugins the lock cannot hold, installed apart for their dry run: Google Batch's pins
# google-cloud-batch below 0.18, which needs protobuf<7 (docs/cloud.md, "Google Batch").
APART = {"googlebatch": REPO / "envs" / "googlebatch.txt"}
# What each engine needs on the command line (docs/cloud.md's commands); a dry run
# contacts none of them.
ARGS = {"googlebatch": ["--googlebatch-project", "vqarobust-dry", "--googlebatch-region", "x"]}


@pytest.fixture(scope="module")
def s3_url(tmp_path_factory):
    with s3_server(tmp_path_factory.mktemp("moto") / "server.log", BUCKET) as url:
        yield url


def jobs(out: str) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(rule, wildcards, resources) of every job a dry run prints."""
    found = []
    for block in re.split(r"\n(?=\[.*\]\n|(?:local)?rule \w+:\n)", out):
        rule = re.search(r"^(?:local)?rule (\w+):", block, re.M)
        if not rule:
            continue
        fields = {}
        for key in ("wildcards", "resources"):
            line = re.search(rf"^\s+{key}: (.*)$", block, re.M)
            pairs = (p.split("=", 1) for p in line.group(1).split(", ")) if line else ()
            fields[key] = {k: v for k, v in pairs}
        found.append((rule.group(1), fields["wildcards"], fields["resources"]))
    return found


def run_dry(
    profile: str, workdir: Path, url: str, edit: Callable[[dict], None] | None = None
) -> subprocess.CompletedProcess:
    """The tiny config, with ViLT asking for a GPU (device auto), 6000 MB and 45 minutes
    and then ``edit``-ed, dry-run through ``profile`` onto a bucket of the server at
    ``url``: the finished process."""
    env = dict(os.environ)
    if profile in APART:
        from tests.harness_venv import package_dir

        ahead = str(package_dir(APART[profile]))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ahead, env.get("PYTHONPATH")]))
    elif importlib.util.find_spec(PLUGINS[profile]) is None:
        pytest.skip(f"{PLUGINS[profile]} is not installed (pip install -e '.[dev]')")
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    config["models"]["vilt-tiny"].update(device="auto", mem_mb=6000, runtime=45)
    if edit is not None:
        edit(config)
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "--profile",
        str(REPO / "profiles" / profile),
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        *storage_args(url, f"s3://{BUCKET}/{profile}"),
        *ARGS.get(profile, []),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


def dry_run(profile: str, workdir: Path, url: str) -> list[tuple[str, dict, dict]]:
    """The jobs :func:`run_dry` plans, which must succeed."""
    proc = run_dry(profile, workdir, url)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    planned = jobs(out)
    assert planned, out[-3000:]
    return planned


def by_rule(planned, rule: str, **wildcards: str) -> list[dict[str, str]]:
    return [
        res
        for name, wc, res in planned
        if name == rule and all(wc.get(k) == v for k, v in wildcards.items())
    ]


def test_kubernetes_jobs_ask_for_the_gpus_memory_and_disk_of_their_rules(s3_url, tmp_path):
    planned = dry_run("kubernetes", tmp_path, s3_url)
    vilt = by_rule(planned, "run_model", model="vilt-tiny")
    # One job per (model, subset): clean, blank, two corruptions, two text perturbations,
    # two basic-question rankers.
    assert len(vilt) == 8
    for res in vilt:
        assert (res["gpu"], res["gpu_manufacturer"], res["mem_mb"], res["runtime"]) == (
            "1",
            "nvidia",
            "6000",
            "45",
        )
    for res in by_rule(planned, "run_model", model="cnn-bow"):
        assert res["gpu"] == "0"
    (attention,) = by_rule(planned, "image_attention")
    assert (attention["gpu"], attention["mem_mb"]) == ("1", "6000")
    for res in by_rule(planned, "train_model"):
        assert (res["mem_mb"], res["runtime"]) == ("8000", "120")
    assert {res["disk_mb"] for _, _, res in planned if "disk_mb" in res} == {"20000"}


def test_aws_batch_gpu_jobs_get_a_gpu_through_the_plugins_own_resource(s3_url, tmp_path):
    """The plugin reads only _gpus: the rules set it from each model's entry, so the GPU
    model's jobs ask for one and the CPU model's for none."""
    planned = dry_run("aws-batch", tmp_path, s3_url)
    for res in by_rule(planned, "run_model", model="vilt-tiny"):
        assert (res["_gpus"], res["gpu"], res["mem_mb"]) == ("1", "1", "6000")
    cnn = by_rule(planned, "run_model", model="cnn-bow")
    assert cnn and {(res["_gpus"], res["gpu"]) for res in cnn} == {("0", "0")}
    (attention,) = by_rule(planned, "image_attention")
    assert attention["_gpus"] == "1"
    for res in by_rule(planned, "train_model"):
        assert "_gpus" not in res and res["mem_mb"] == "8000"


def test_google_batch_gpu_jobs_ask_for_an_a100(s3_url, tmp_path):
    """The plugin reads its own resource names, which the profile sets per rule: every
    inference and attention job asks for an A100 machine (the model entry's values do not
    reach it), training for 8 GB, the rest for the defaults."""
    planned = dry_run("googlebatch", tmp_path, s3_url)
    assert len(by_rule(planned, "run_model", model="vilt-tiny")) == 8
    a100 = ("nvidia-tesla-a100", "a2-highgpu-1g", "48000", "21600s")
    for rule in ("run_model", "image_attention"):
        for res in by_rule(planned, rule):
            assert (
                res["nvidia_gpu"],
                res["googlebatch_machine_type"],
                res["googlebatch_memory"],
                res["googlebatch_max_run_duration"],
            ) == a100, rule
    for res in by_rule(planned, "train_model"):
        assert (res["googlebatch_memory"], res["googlebatch_max_run_duration"]) == ("8000", "7200s")
    corrupt = by_rule(planned, "corrupt_images")
    assert corrupt and all("nvidia_gpu" not in res for res in corrupt)
    assert {res["googlebatch_memory"] for res in corrupt} == {"4000"}


def test_files_the_config_names_must_reach_the_jobs(s3_url, tmp_path):
    """A checkpoint folder outside the working directory would not reach a Kubernetes job
    (its jobs get only the deployed sources): refused before any job, saying why and what
    to do; with storage.named_files: on_nodes the same config plans."""
    folder = tmp_path / "weights" / "cnn"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")

    def local_checkpoint(config: dict) -> None:
        config["models"]["cnn-bow"] = {"family": "vqa-classifier", "path_or_id": str(folder)}

    proc = run_dry("kubernetes", tmp_path / "refused", s3_url, local_checkpoint)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"the config names {folder}, which no job of this executor would find" in out
    assert "it lies outside the working directory" in out and "named_files: on_nodes" in out
    assert "Job stats" not in out  # nothing planned, nothing ran

    def on_nodes(config: dict) -> None:
        local_checkpoint(config)
        config["storage"] = {"named_files": "on_nodes"}

    proc = run_dry("kubernetes", tmp_path / "on-nodes", s3_url, on_nodes)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert by_rule(jobs(proc.stdout + proc.stderr), "run_model", model="cnn-bow")

"""``vqarobust cloud-plan``: a study's jobs, submissions, GPU-hours and storage bytes on a
profile, from a finished pilot (docs/cloud.md, "Before a cloud run")."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from vqarobust import cloud_plan as cp

DRY_RUN = """\
Building DAG of jobs...
[Sun Dec  6 18:36:09 2026]
rule corrupt_images:
    input: resources/datasets/d/eval/images
    output: resources/images/d/snow/1
    jobid: 3
    wildcards: corruption=snow, severity=1
    resources: tmpdir=/tmp, mem_mb=4000, runtime=30
[Sun Dec  6 18:36:09 2026]
localrule load_duckdb:
    input: results/d/tables/a
    output: results/d/robustness.duckdb
    jobid: 1
    resources: tmpdir=/tmp
[Sun Dec  6 18:36:09 2026]
rule run_model:
    output: results/d/predictions/m/clean.parquet, results/d/predictions/m/snow.parquet
    jobid: 2
    resources: tmpdir=/tmp, gpu=1, mem_mb=6000
"""


def _job(rule: str, local: bool = False, outputs: int = 1) -> cp.PlannedJob:
    return cp.PlannedJob(rule, local, tuple(f"{rule}/{i}" for i in range(outputs)))


def test_a_dry_runs_jobs_are_read_with_outputs_and_resources() -> None:
    jobs = cp.parse_dry_run(DRY_RUN)
    assert [(j.rule, j.local, len(j.outputs)) for j in jobs] == [
        ("corrupt_images", False, 1),
        ("load_duckdb", True, 1),
        ("run_model", False, 2),
    ]
    assert jobs[0].resources == {"tmpdir": "/tmp", "mem_mb": "4000", "runtime": "30"}
    assert cp._gpus(jobs[2].resources) == 1 and cp._gpus(jobs[0].resources) == 0


def test_a_group_job_is_one_submission_and_a_local_rule_makes_none() -> None:
    text = DRY_RUN + (
        "[Sun Dec  6 18:40:26 2026] Group job corrupt (jobs in lexicogr. order):\n\n"
        + "".join(
            f"    [Sun Dec  6 18:40:26 2026]\n    rule corrupt_images:\n"
            f"        output: resources/images/d/fog/{s}\n"
            for s in (1, 2, 3)
        )
        + "[Sun Dec  6 18:40:26 2026]\nrule run_model:\n    output: results/d/p/x.parquet\n"
    )
    jobs = cp.parse_dry_run(text)
    assert [(j.rule, j.group) for j in jobs[3:]] == [
        *[("corrupt_images", "corrupt #1")] * 3,
        ("run_model", None),  # at the margin again: out of the group
    ]
    # corrupt_images: one job alone, three in one group job; the local rule none.
    assert cp.submissions(jobs) == {"corrupt_images": 2, "load_duckdb": 0, "run_model": 2}
    assert cp.group_jobs(jobs) == {"corrupt": (1, 3)}


def test_profiles_merge_key_by_key_and_their_config_entries_are_read(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "config.yaml").write_text(
        yaml.safe_dump({"executor": "slurm", "config": ["inference_jobs=subset"], "jobs": 9})
    )
    (second / "config.yaml").write_text(yaml.safe_dump({"jobs": 3, "config": ["seed=4"]}))
    merged = cp.read_profiles([first, second])
    assert merged == {"executor": "slurm", "config": ["seed=4"], "jobs": 3}
    assert cp.config_overrides(cp.read_profiles([first])) == {"inference_jobs": "subset"}
    with pytest.raises(ValueError, match="not key=value"):
        cp.config_overrides({"config": ["inference_jobs"]})
    with pytest.raises(ValueError, match="no config.yaml"):
        cp.read_profiles([tmp_path / "missing"])


def test_the_workflows_local_rules_are_found_in_its_rule_files() -> None:
    assert cp.local_rules(REPO / "Snakefile") == {
        "all",
        "analyze",
        "load_duckdb",
        "render_report",
        "hf_dataset",
    }


def test_a_pilots_outputs_are_counted_by_the_rule_that_made_them(tmp_path: Path) -> None:
    meta = tmp_path / ".snakemake" / "metadata"
    meta.mkdir(parents=True)
    files = {"a/x.parquet": ("run_model", 10), "a/y.parquet": ("run_model", 30)}
    (tmp_path / "imgs").mkdir()
    for name, size in (("1.png", 5), ("2.png", 7)):
        (tmp_path / "imgs" / name).write_bytes(b"0" * size)
    for path, (_rule, size) in files.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_bytes(b"0" * size)
    records = {**{p: r for p, (r, _) in files.items()}, "imgs": "corrupt_images"}
    records["gone.parquet"] = "analyze"  # recorded, since deleted: not counted
    for path, rule in records.items():
        name = base64.urlsafe_b64encode(path.encode()).decode()
        (meta / name).write_text(json.dumps({"rule": rule}))
    assert cp.pilot_outputs(tmp_path) == {"run_model": (2, 40), "corrupt_images": (1, 12)}
    with pytest.raises(ValueError, match="no .snakemake/metadata"):
        cp.pilot_outputs(tmp_path / "imgs")


def test_bytes_scale_per_rule_and_unknown_rules_stay_unknown() -> None:
    jobs = [_job("run_model", outputs=3), _job("corrupt_images"), _job("train_model")]
    jobs += [_job("swap_context")]
    pilot = {"run_model": (2, 40), "corrupt_images": (1, 12), "train_model": (1, 100)}
    rows = {r.rule: r for r in cp.rule_rows(jobs, pilot, images=5.0, questions=2.0)}
    assert rows["run_model"].bytes == 20 * 2 * 3  # mean 20 per output, x2 questions, 3 outputs
    assert rows["corrupt_images"].bytes == 12 * 5
    assert rows["train_model"].bytes == 100  # a checkpoint does not grow with the data
    assert rows["swap_context"].bytes is None
    assert cp.human_bytes(1_234_567) == "1.2 MB" and cp.human_bytes(None) == "unknown"


def _cloud_plan(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "vqarobust.cli", "cloud-plan", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600)


def _table(out: str) -> dict[str, list[str]]:
    """The rule table (the first one printed), by rule."""
    block = out[out.index("| rule |") :].split("\n\n", 1)[0]
    rows = [line.strip("|").split(" | ") for line in block.splitlines()[2:]]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


@pytest.mark.workflow
def test_on_the_tiny_run_the_plan_is_its_own_jobs_and_bytes(workflow_run, tmp_path):
    """Pilot and target the tiny config: the bytes are exactly the pilot's outputs, the
    analyses run locally and the SLURM profile groups the corruption jobs; with twice the
    images, what grows with them doubles."""
    source, config = workflow_run
    target = tmp_path / "tiny.yaml"
    target.write_text(yaml.safe_dump(config))
    pilot = str(source / "results" / "easy-vqa")
    common = ["--configfile", str(target), "--pilot", pilot, "--directory", str(tmp_path)]
    common += ["--snakefile", str(REPO / "Snakefile")]
    slurm = _cloud_plan("--profile", str(REPO / "profiles" / "slurm"), *common, cwd=tmp_path)
    assert slurm.returncode == 0, slurm.stderr
    table = _table(slurm.stdout)
    recorded = cp.pilot_outputs(source)
    # The pilot's model jobs wrote the attention tables: vilt-tiny's counts as the
    # image_attention job of the SLURM plan's per-subset inference; the trained cnn-bow's
    # architecture has no attention, so its empty one counts as no job.
    assert recorded["image_attention"][0] == 1
    assert f"Storage: {sum(b for _, b in recorded.values()):,} bytes" in slurm.stdout
    assert table["analyze"][1:3] == ["locally", "0"]
    # Five corruption jobs, ten to a group job (group-components); the question jobs'
    # group job is counted at its first job's rule.
    assert table["corrupt_images"][:3] == ["5", "slurm", "1"]
    assert "corrupt: 1 holding 5 jobs" in slurm.stdout

    doubled = yaml.safe_load(yaml.safe_dump(config))
    doubled["dataset"]["n_images"] = 2 * config["dataset"]["n_images"]
    target.write_text(yaml.safe_dump(doubled))
    kube = _cloud_plan("--profile", str(REPO / "profiles" / "kubernetes"), *common, cwd=tmp_path)
    assert kube.returncode == 0, kube.stderr
    grown = _table(kube.stdout)
    n, size = recorded["prepare_dataset"]
    assert grown["prepare_dataset"][-1].startswith(cp.human_bytes(round(size / n * 2 * n)))
    # inference_jobs=subset: one run_model job per (model, subset), each its own pod.
    assert int(grown["run_model"][0]) == int(grown["run_model"][2]) == recorded["run_model"][0]
    assert "config inference_jobs=subset" in kube.stdout


def test_bad_inputs_fail_with_the_reason(workflow_run, tmp_path):
    source, config = workflow_run
    target = tmp_path / "tiny.yaml"
    target.write_text(yaml.safe_dump(config))
    args = ["--configfile", str(target), "--directory", str(tmp_path)]
    no_profile = _cloud_plan("--profile", str(tmp_path), *args, "--pilot", str(source), cwd=REPO)
    assert no_profile.returncode == 2 and "no config.yaml" in no_profile.stderr
    copy = tmp_path / "results" / "easy-vqa"
    copy.mkdir(parents=True)
    (copy / "robustness.duckdb").write_bytes(
        (source / "results" / "easy-vqa" / "robustness.duckdb").read_bytes()
    )
    profile = str(REPO / "profiles" / "default")
    bare = _cloud_plan("--profile", profile, *args, "--pilot", str(copy), cwd=REPO)
    assert bare.returncode == 2 and "no .snakemake/metadata" in bare.stderr


@pytest.mark.workflow
def test_the_docs_plan_has_the_jobs_a_fresh_dry_run_plans(workflow_run, tmp_path):
    """docs/results/cloud-plan-geometric.md was made from the default run; its jobs,
    where they run and their submissions depend on the config and profile alone, so the
    same command with the session's tiny run as the pilot must print them again."""
    doc = (REPO / "docs" / "results" / "cloud-plan-geometric.md").read_text()
    command = doc.splitlines()[0].removeprefix("<!-- ").removesuffix(" -->").split()
    assert command[:2] == ["vqarobust", "cloud-plan"]
    pilot = command.index("--pilot") + 1
    command[pilot] = str(workflow_run[0] / "results" / "easy-vqa")
    proc = _cloud_plan(*command[2:], cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    fresh, documented = _table(proc.stdout), _table(doc)
    assert {r: v[:4] for r, v in fresh.items()} == {r: v[:4] for r, v in documented.items()}

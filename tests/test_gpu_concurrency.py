"""Every GPU busy: under ``--cores 8 --resources gpu=4`` four GPU jobs run at once, never
five, each on a GPU of its own, although the study asks 4 threads per inference job
(which used to let the cores admit only two). Without a GPU here, the jobs lease among
four pretend GPUs (``VQAROBUST_PRETEND_GPUS``, vqarobust.devices) and run on the CPU; the
example plugin's model waits on purpose while loading, so that each job holds its lease
for seconds. The times and ids come from each job's own log."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO
from tests.plugin_example import EXAMPLE, colour_bag_checkpoint
from vqarobust.plan.models import cores_per_gpu, gpu_job_threads

CORRUPTIONS = ["gaussian_noise", "brightness", "contrast", "pixelate", "jpeg_compression"]
# Seconds each job holds its lease beyond its own work: longer than the spread of the
# four jobs' starts (each imports torch) on this 2-core machine.
LOAD_DELAY_S = 3
LINE = re.compile(
    r"^(\S+ \S+) INFO vqarobust\.devices: (?:leased pretend GPU (\d+) of 4|released GPU (\d+))"
)


def test_a_gpu_jobs_threads_are_its_share_of_the_cores():
    assert cores_per_gpu(8, 4) == 2
    assert cores_per_gpu(8, 3) == 2  # 2 + 2 + 2 of 8: the cores never bind first
    assert cores_per_gpu(2, 4) == 1  # at least one, even with fewer cores than GPUs
    # Nothing to share: no --resources gpu=N, --resources gpu=0, or a cluster run.
    assert cores_per_gpu(8, None) is None
    assert cores_per_gpu(8, 0) is None
    assert cores_per_gpu(None, 4) is None
    assert gpu_job_threads(4, 2) == 2
    assert gpu_job_threads(1, 2) == 1  # never more than the config asks
    assert gpu_job_threads(4, None) == 4


def test_an_attention_job_takes_one_thread_on_the_cpu_and_a_gpu_jobs_share_on_a_gpu():
    """The default study (threads.infer 2): a model's inference job takes 2 threads, its
    attention job 1 on the CPU; on a GPU of a run with 2 cores per GPU, both take 2."""
    from types import SimpleNamespace

    from vqarobust.config import validate_config
    from vqarobust.plan import StudyPlan

    config = validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    plan = StudyPlan.build(config)
    cpu = SimpleNamespace(dataset=plan.dataset, model="vilt-tiny")
    assert plan.models.model_threads(cpu) == 2
    assert plan.models.attention_threads(cpu) == 1
    config["models"]["vilt-tiny"]["device"] = "cuda"
    plan = StudyPlan.build(config)
    plan.models.cores_per_gpu = 2
    assert plan.models.attention_threads(cpu) == plan.models.model_threads(cpu) == 2


def _snakemake(work: Path, env: dict[str, str], *args: str) -> str:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work)]
    proc = subprocess.run(
        [*cmd, *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def _leases(log: Path) -> tuple[str, float, float]:
    """The GPU id a job leased, and when it took and released it (seconds)."""
    events = []
    for line in log.read_text().splitlines():
        match = LINE.match(line)
        if match:
            when = dt.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            events.append((match[2] or match[3], when))
    (gpu, start), (released, end) = events  # exactly one lease per job
    assert released == gpu
    return gpu, start, end


@pytest.mark.workflow
@pytest.mark.slow
def test_four_gpu_jobs_run_at_once_each_on_its_own_gpu(tmp_path):
    work = tmp_path / "work"
    (work / "config").mkdir(parents=True)
    colour_bag_checkpoint(work / "models" / "slow-bag", load_delay_s=LOAD_DELAY_S)
    config = {
        "seed": 0,
        "dataset": {"name": "easy-vqa", "adapter": "easy-vqa", "n_images": 4},
        "plugins": ["vqarobust_example.models"],
        "corruptions": CORRUPTIONS,
        "controls": [],
        "severities": [1],
        "text": {"perturbations": []},
        "basic_questions": {"rankers": []},
        # The study configs' 4 threads: with 8 cores, two such jobs would fill them.
        "threads": {"infer": 4},
        # One job per (model, subset): clean and five corruptions, six GPU jobs.
        "inference_jobs": "subset",
        "models": {
            "slow-bag": {
                "family": "example-colour-bag",
                "path_or_id": "models/slow-bag",
                "batch_size": 4,
                # A job that finds no free GPU fails: a fifth at once would fail the run.
                "device": "cuda",
            }
        },
    }
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLE / "src"), env.get("PYTHONPATH", "")])
    env["VQAROBUST_PRETEND_GPUS"] = "4"
    env["VQAROBUST_GPU_LOCK_DIR"] = str(tmp_path / "locks")
    # The images first, so that all six inference jobs are ready together.
    _snakemake(work, env, "--cores", "2", "--until", "corrupt_images")
    out = _snakemake(work, env, "--cores", "8", "--resources", "gpu=4", "--until", "run_model")
    assert re.search(r"^run_model\s+6$", out, flags=re.MULTILINE), out[-4000:]
    assert not re.search(r"^corrupt_images\s+\d+$", out, flags=re.MULTILINE)

    logs = sorted((work / "logs" / "easy-vqa" / "run_model" / "slow-bag").glob("*.log"))
    assert [p.stem for p in logs] == sorted(["clean", *CORRUPTIONS])
    leases = [_leases(p) for p in logs]
    # Sweep the 12 events in time order: the GPUs held at each moment.
    events = sorted(
        [(start, 1, gpu) for gpu, start, _ in leases] + [(end, -1, gpu) for gpu, _, end in leases],
        key=lambda e: (e[0], e[1]),  # a release before a lease at the same instant
    )
    held: set[str] = set()
    most = 0
    for _, step, gpu in events:
        if step == 1:
            assert gpu not in held, f"GPU {gpu} leased twice at once: {leases}"
            held.add(gpu)
        else:
            held.remove(gpu)
        most = max(most, len(held))
    assert most == 4, leases
    assert {gpu for gpu, *_ in leases} == {"0", "1", "2", "3"}
    # Each job ran with its share of the cores (8 / 4), not the config's 4 threads.
    predictions = work / "results" / "easy-vqa" / "predictions" / "slow-bag"
    for path in sorted(predictions.glob("*.parquet")):
        record = json.loads(pq.read_schema(path).metadata[b"vqarobust.inputs"])
        assert record["machine"]["torch_threads"] == 2, path.name

"""What Snakemake would run, computed through its API in the test process (a
``snakemake -n`` process costs about 10 s more here: the SLURM plugin's probes at import).

:func:`plan` is a dry run of a working directory: the jobs Snakemake plans. :func:`jobs`
is the whole job graph of a config, each job with what Snakemake compares to decide a
rerun (its params as Snakemake serializes them, its input files); :func:`reruns` is the
set of stages that Snakemake's params and input triggers rerun between two such graphs,
with everything downstream (``tests/test_workflow.py`` checks that it equals a real plan
on a finished run, key by key).

:func:`snakemake` runs Snakemake in a process on a working directory; :func:`planned_jobs`
reads the job counts of its dry-run output, in :func:`plan`'s form; :func:`analyses` and
``FROM_PREDICTIONS`` are entries of that form, for the assertions.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO


def stage_of(job: Any) -> str:
    """A job's stage: its rule, or ``analyze:<analysis>``."""
    name = job.rule.name
    return f"analyze:{dict(job.wildcards)['analysis']}" if name == "analyze" else name


@contextmanager
def _dag(workdir: Path) -> Iterator[Any]:
    """The workflow of ``workdir`` (its config/config.yaml) with its DAG built."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import DAGSettings, OutputSettings, Quietness, ResourceSettings

    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            wf = api.workflow(
                resource_settings=ResourceSettings(cores=2),
                snakefile=REPO / "Snakefile",
                workdir=workdir,
            )
            # Building the rule graph builds the DAG and decides what needs to run, without
            # the dry run's scheduling and printing of every job (half the time).
            with contextlib.redirect_stdout(io.StringIO()):
                wf.dag(DAGSettings()).printrulegraph()
            yield wf._workflow_store
    finally:
        os.chdir(cwd)


def plan(workdir: Path) -> dict[str, int]:
    """The jobs a dry run of ``workdir`` plans, counted by stage; empty when there is
    nothing to be done."""
    with _dag(workdir) as workflow:
        names = [stage_of(j) for j in workflow.dag.needrun_jobs()]
    return {name: names.count(name) for name in sorted(set(names))}


@dataclass(frozen=True)
class Job:
    """One job as Snakemake's rerun triggers see it."""

    stage: str
    params: tuple[str, ...]
    inputs: tuple[str, ...]
    after: frozenset[tuple[str, ...]]
    wildcards: tuple[tuple[str, str], ...] = ()
    needrun: bool = False  # Snakemake's own decision on this working directory


def _key(job: Any) -> tuple[str, ...]:
    return tuple(sorted(map(str, job.output))) or (f"<{job.rule.name}>",)


def jobs(workdir: Path) -> dict[tuple[str, ...], Job]:
    """Every job of ``workdir``'s workflow (to run or not), keyed by its output files."""
    with _dag(workdir) as workflow:
        dag, persistence = workflow.dag, workflow.persistence
        needrun = set(dag.needrun_jobs())
        return {
            _key(job): Job(
                stage_of(job),
                tuple(map(repr, persistence._params(job))),
                tuple(sorted(persistence._input(job))),
                frozenset(_key(d) for d in dag.dependencies[job]),
                tuple(sorted(dict(job.wildcards).items())),
                job in needrun,
            )
            for job in dag.jobs
        }


def triggered(
    before: dict[tuple[str, ...], Job], after: dict[tuple[str, ...], Job]
) -> set[tuple[str, ...]]:
    """The jobs of ``after`` that Snakemake's own triggers rerun on a finished run of
    ``before``: new jobs, and jobs whose params or input file lists differ."""
    return {
        key
        for key, job in after.items()
        if key not in before or (before[key].params, before[key].inputs) != (job.params, job.inputs)
    }


def reruns(before: dict[tuple[str, ...], Job], after: dict[tuple[str, ...], Job]) -> set[str]:
    """The stages of ``after`` that rerun on a finished run of ``before``: the triggered
    jobs and every job downstream of one."""
    return downstream(after, triggered(before, after))


def downstream(graph: dict[tuple[str, ...], Job], start: set[tuple[str, ...]]) -> set[str]:
    """The stages of the jobs ``start`` and of every job downstream of them in ``graph``."""
    hit = set(start)
    grown = True
    while grown:
        grown = False
        for key, job in graph.items():
            if key not in hit and job.after & hit:
                hit.add(key)
                grown = True
    return {graph[key].stage for key in hit} - {"all"}


def write_config(workdir: Path, config: dict) -> None:
    """``config`` as ``workdir``'s config/config.yaml."""
    (workdir / "config").mkdir(parents=True, exist_ok=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))


def snakemake(workdir: Path, *args: str) -> str:
    """The output of ``snakemake *args`` on ``workdir`` on 2 cores; fails with its end
    when Snakemake does."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{out[-6000:]}")
    return out


def planned_jobs(output: str) -> dict[str, int]:
    """Job counts from the 'Job stats' table of a dry run; the ``analyze`` jobs one key
    each, ``analyze:<analysis>`` (from the jobs' wildcards)."""
    counts = {}
    for rule, n in re.findall(r"^(\w+)\s+(\d+)$", output, flags=re.MULTILINE):
        if rule not in ("total", "analyze"):
            counts[rule] = int(n)
    for name in set(re.findall(r"wildcards: .*analysis=(\w+)", output)):
        counts[f"analyze:{name}"] = 1
    return counts


def analyses(*names: str) -> dict[str, int]:
    """The planned-jobs entries of these analyses."""
    return {f"analyze:{name}": 1 for name in names}


# The tiny config's analyses that read the predictions, directly or through scoring:
# every one but the attention shift (it reads only the attention maps).
FROM_PREDICTIONS = (
    "scoring",
    "accuracy",
    "robustness",
    "uncertainty",
    "image_quality",
    "samples",
    "mispredictions",
    "colour_bias",
    "context",
    "context_findings",
    "model_cards",
    "costs",
)


# The shipped study configs that validate on any machine (gqa.yaml names data files;
# models.yaml is a catalogue of entries, not a study).
STUDIES = [
    "config",
    "basic-questions",
    "geometric",
    "modern",
    "multimodal",
    "paper",
    "reference-models",
    "scenes",
    "scenes-features",
]


def study_config(name: str) -> dict:
    """A shipped study config, validated as the workflow validates it."""
    from vqarobust.config import validate_config

    return validate_config(yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text()))

"""What a study will need on a cluster or cloud profile before it runs
(``vqarobust cloud-plan``): its jobs and the submissions they make, its GPU-hours, and the
bytes its outputs will hold in the bucket.

* **Jobs** come from Snakemake itself: a dry run (``--forceall``) of the target config
  with the keys of the profile that shape the plan (its ``config`` overrides, resources,
  threads and groups; not its executor or storage, so nothing is contacted). A local rule
  (``localrule: True``) runs where Snakemake runs; every other job is a submission, or a
  member of a group job that Snakemake forms from the profile's ``groups`` and
  ``group-components``.
* **GPU-hours** are :mod:`vqarobust.gpu_hours`' (a throughput table or the pilot), with
  the target's ``inference_jobs`` as the profile sets it.
* **Storage** is scaled from a finished pilot's outputs: Snakemake's record of the pilot
  (``.snakemake/metadata``) names the rule of each output file or folder; each target
  output of a rule holds the pilot's mean bytes per output of that rule, times the
  target's images over the pilot's (rules that write images), or its questions over the
  pilot's (rules that write per-question rows), or once (checkpoints, the report). A rule
  the pilot did not run is unknown, never zero.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The profile keys that change which jobs a run has or what they ask for; the others
# (executor, storage, container, the plugins' own settings) only say where jobs go.
PLAN_KEYS = (
    "config",
    "default-resources",
    "set-resources",
    "set-threads",
    "groups",
    "group-components",
)
# How a rule's output grows from the pilot to the target (any rule not named: questions).
IMAGE_RULES = frozenset(
    {
        "prepare_dataset",
        "corrupt_images",
        "swap_context",
        "extract_features",
        "extract_image_features",
        "swap_features",
        "object_boxes",
        "image_attention",
        "score_lpips",
    }
)
FIXED_RULES = frozenset({"train_model", "train_detector", "render_report", "all"})


@dataclass(frozen=True)
class PlannedJob:
    """One job of a dry run: its rule, whether it is a local rule, its outputs, the
    resources it asks for, and the group job it goes out in (None: its own)."""

    rule: str
    local: bool
    outputs: tuple[str, ...]
    resources: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None


def read_profiles(folders: Sequence[str | Path]) -> dict[str, Any]:
    """The profiles' ``config.yaml`` merged as Snakemake merges repeated ``--profile``:
    a later profile's key replaces the earlier one's whole."""
    merged: dict[str, Any] = {}
    for folder in folders:
        path = Path(folder) / "config.yaml"
        if not path.is_file():
            raise ValueError(f"{folder} is no Snakemake profile: it has no config.yaml")
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} is not a mapping of Snakemake options")
        merged.update(loaded)
    return merged


def config_overrides(profile: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's ``config`` entries (``key=value``, the value read as YAML)."""
    out = {}
    for entry in profile.get("config") or []:
        key, sep, value = str(entry).partition("=")
        if not sep or not key:
            raise ValueError(f"the profile's config entry {entry!r} is not key=value")
        out[key] = yaml.safe_load(value)
    return out


def parse_dry_run(text: str) -> list[PlannedJob]:
    """Every job a Snakemake dry run prints: its rule, local or not, outputs, resources
    and group job (Snakemake prints a group job's members indented under its header)."""
    found: list[dict[str, Any]] = []
    group, groups = None, 0
    for line in text.splitlines():
        header = re.search(r"Group job (\S+) \(", line)
        if header:
            groups += 1
            group = f"{header.group(1)} #{groups}"
            continue
        rule = re.match(r"^(\s*)(local)?rule (\w+):$", line)
        if rule:
            group = group if rule.group(1) else None  # a job at the margin ends a group
            found.append({"rule": rule.group(3), "local": bool(rule.group(2)), "group": group})
            continue
        field_ = re.match(r"^\s+(output|resources): (.*)$", line)
        if field_ and found and field_.group(1) not in found[-1]:
            found[-1][field_.group(1)] = field_.group(2).split(", ")
    return [
        PlannedJob(
            j["rule"],
            j["local"],
            tuple(j.get("output", [])),
            dict(p.split("=", 1) for p in j.get("resources", []) if "=" in p),
            j["group"],
        )
        for j in found
    ]


def dry_run(
    snakefile: str | Path,
    configfile: str | Path,
    profile: Mapping[str, Any],
    directory: str | Path,
) -> list[PlannedJob]:
    """The jobs of a from-scratch run of ``configfile`` under the profile's plan keys."""
    shaping = {k: v for k, v in profile.items() if k in PLAN_KEYS}
    with tempfile.TemporaryDirectory(prefix="vqarobust-profile-") as folder:
        (Path(folder) / "config.yaml").write_text(yaml.safe_dump(shaping))
        cmd = [sys.executable, "-m", "snakemake", "-n", "--forceall", "--profile", folder]
        cmd += ["-s", str(Path(snakefile).resolve()), "-d", str(directory)]
        cmd += ["--configfile", str(Path(configfile).resolve()), "--replace-workflow-config"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_no_profile_env())
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise ValueError(
            f"the dry run of {configfile} failed (its inputs must exist: `vqarobust "
            f"validate-config --strict {configfile}` names them):\n{out[-3000:]}"
        )
    local = local_rules(snakefile)
    jobs = [
        PlannedJob(j.rule, j.local or j.rule in local, j.outputs, j.resources, j.group)
        for j in parse_dry_run(out)
    ]
    if not jobs:
        raise ValueError(f"the dry run of {configfile} planned no job:\n{out[-3000:]}")
    return jobs


def local_rules(snakefile: str | Path) -> set[str]:
    """The rules of the workflow that say ``localrule: True`` (the Snakefile and its
    ``rules/*.smk``): a dry run without a cluster executor prints them as any rule."""
    root = Path(snakefile)
    found = set()
    for path in [root, *sorted((root.parent / "rules").glob("*.smk"))]:
        text = path.read_text() if path.is_file() else ""
        for block in re.split(r"^(?=rule \w+:)", text, flags=re.M):
            name = re.match(r"rule (\w+):", block)
            if name and re.search(r"^\s+localrule:\s*True\b", block, re.M):
                found.add(name.group(1))
    return found


def _no_profile_env() -> dict[str, str]:
    # A user's SNAKEMAKE_PROFILE would add its keys to the plan's: only the given count.
    return {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}


def submissions(jobs: Sequence[PlannedJob]) -> dict[str, int]:
    """Per rule, the cluster jobs its jobs make: none for a local rule, one per job, and
    one per group job (as Snakemake formed it), counted at the rule of its first job."""
    out = {job.rule: 0 for job in jobs}
    seen: set[str] = set()
    for job in jobs:
        if job.local or job.group in seen:
            continue
        out[job.rule] += 1
        if job.group is not None:
            seen.add(job.group)
    return out


def group_jobs(jobs: Sequence[PlannedJob]) -> dict[str, tuple[int, int]]:
    """Per group name, (group jobs, member jobs)."""
    out: dict[str, tuple[int, int]] = {}
    for name in dict.fromkeys(j.group for j in jobs if j.group):
        members = sum(j.group == name for j in jobs)
        base = name.rsplit(" #", 1)[0]
        n, total = out.get(base, (0, 0))
        out[base] = (n + 1, total + members)
    return out


def _size(path: Path) -> int | None:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return None


def _attention_rule(workdir: Path, path: str, rule: str) -> str | None:
    """The rule a pilot's output counts for: a per-model run_model job's attention table
    counts as the image_attention job that writes it under per-subset inference (so that
    a local per-model pilot plans the per-subset target every shipped cluster profile
    sets; a per-model target counts its tables as run_model outputs), and is left out when
    its model's family exposes no attention (vqarobust.attention.NO_ATTENTION: no such
    job would write it)."""
    if rule != "run_model" or not re.fullmatch(r"results/[^/]+/attention/[^/]+\.parquet", path):
        return rule
    import pyarrow.parquet as pq

    from vqarobust.attention import NO_ATTENTION

    metadata = pq.read_schema(workdir / path).metadata or {}
    return None if NO_ATTENTION.keys() & metadata.keys() else "image_attention"


def pilot_outputs(workdir: str | Path) -> dict[str, tuple[int, int]]:
    """Per rule of the pilot run in ``workdir``, (outputs, bytes) of the outputs that
    Snakemake recorded and that still exist (:func:`_attention_rule`)."""
    folder = Path(workdir) / ".snakemake" / "metadata"
    if not folder.is_dir():
        raise ValueError(
            f"{workdir} holds no .snakemake/metadata: give the results folder of a pilot "
            "run from its own working directory"
        )
    out: dict[str, tuple[int, int]] = {}
    for entry in folder.iterdir():
        name = entry.name
        path = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
        try:
            rule = json.loads(entry.read_text())["rule"]
        except (OSError, ValueError, KeyError):
            continue  # a record being written, or another version's
        size = _size(Path(workdir) / path)
        if size is not None:
            rule = _attention_rule(Path(workdir), path, rule)
            if rule is None:
                continue
            n, total = out.get(rule, (0, 0))
            out[rule] = (n + 1, total + size)
    if not out:
        raise ValueError(f"{workdir}/.snakemake/metadata names no existing output")
    return out


def pilot_workdir(pilot: str | Path) -> Path:
    """The working directory a pilot ran in, from its results DuckDB file
    (``results/<dataset>/robustness.duckdb``) or results folder (``results/<dataset>``)."""
    path = Path(pilot).resolve()
    return path.parents[2] if path.is_file() else path.parents[1]


def scales(plan: Any, pilot: Any, questions: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(pilot, target) images and (pilot, target) questions: the pilot's from its table
    of questions, the target's ``questions`` and its ``dataset.n_images`` (else those
    questions over the pilot's questions per image)."""
    import duckdb

    source = Path(pilot.source)
    database = source if source.is_file() else source / "robustness.duckdb"
    if not database.is_file():
        raise ValueError(f"{pilot.source} has no robustness.duckdb to count its questions")
    with duckdb.connect(str(database), read_only=True) as con:
        asked, images = con.execute(
            "SELECT count(*), count(DISTINCT image_id) FROM questions"
        ).fetchone()
    if not asked or not images:
        raise ValueError(f"{database} has no questions to scale from")
    target_images = plan.config["dataset"].get("n_images") or round(questions * images / asked)
    return (images, target_images), (asked, questions)


def scale_of(rule: str, images: float, questions: float) -> tuple[float, str]:
    """How much larger an output of ``rule`` gets from the pilot to the target."""
    if rule in FIXED_RULES:
        return 1.0, "once"
    if rule in IMAGE_RULES:
        return images, "images"
    return questions, "questions"


@dataclass(frozen=True)
class RuleRow:
    """One rule of the target on the profile."""

    rule: str
    jobs: int
    local: bool
    submissions: int
    gpu_jobs: int
    outputs: int
    bytes: int | None
    grows_with: str


def rule_rows(
    jobs: Sequence[PlannedJob],
    pilot: Mapping[str, tuple[int, int]],
    images: float,
    questions: float,
) -> list[RuleRow]:
    """A row per rule of the target, in the dry run's order of first appearance."""
    made = submissions(jobs)
    rows = []
    for rule in dict.fromkeys(j.rule for j in jobs):
        mine = [j for j in jobs if j.rule == rule]
        outputs = sum(len(j.outputs) for j in mine)
        factor, grows = scale_of(rule, images, questions)
        n, total = pilot.get(rule, (0, 0))
        size = round(total / n * factor * outputs) if n else (0 if not outputs else None)
        gpus = sum(_gpus(j.resources) > 0 for j in mine)
        local = all(j.local for j in mine)
        rows.append(RuleRow(rule, len(mine), local, made.get(rule, 0), gpus, outputs, size, grows))
    return rows


def _gpus(resources: Mapping[str, str]) -> int:
    for key in ("gpu", "_gpus", "nvidia_gpu"):
        value = resources.get(key)
        if value is not None:
            return int(value) if value.isdigit() else 1
    return 0


def human_bytes(n: int | None) -> str:
    """Bytes in decimal units (the providers' price units)."""
    if n is None:
        return "unknown"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _rule_table(rows: Sequence[RuleRow], executor: str) -> list[str]:
    """The table of rules, with its totals."""
    lines = [
        "| rule | jobs | runs | submissions | GPU jobs | outputs | bytes (grows with) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        where = "locally" if r.local else executor
        lines.append(
            f"| {r.rule} | {r.jobs:,} | {where} | {r.submissions:,} | {r.gpu_jobs:,} | "
            f"{r.outputs:,} | {human_bytes(r.bytes)} ({r.grows_with}) |"
        )
    known = sum(r.bytes for r in rows if r.bytes is not None)
    lines.append(
        f"| total | {sum(r.jobs for r in rows):,} | | {sum(r.submissions for r in rows):,} "
        f"| {sum(r.gpu_jobs for r in rows):,} | {sum(r.outputs for r in rows):,} | "
        f"{human_bytes(known)} |"
    )
    return lines


def to_markdown(
    rows: Sequence[RuleRow],
    profile_names: Sequence[str],
    profile: Mapping[str, Any],
    images: tuple[float, float],
    questions: tuple[float, float],
    gpu_block: str,
    command: str,
    groups: Mapping[str, tuple[int, int]] | None = None,
) -> str:
    """The plan: the jobs table, the storage sums, the assumption and the GPU-hours."""
    executor = profile.get("executor", "local")
    overrides = ", ".join(f"{k}={v}" for k, v in config_overrides(profile).items())
    lines = [
        f"<!-- {command} -->",
        "",
        f"Profile {' + '.join(profile_names)}: executor {executor}"
        + (f", config {overrides}" if overrides else "")
        + ".",
        "",
        *_rule_table(rows, executor),
    ]
    known = [r.bytes for r in rows if r.bytes is not None]
    unknown = [r.rule for r in rows if r.bytes is None]
    lines += [
        "",
        f"Storage: {sum(known):,} bytes of outputs in the bucket after the run"
        + (f"; unknown for {', '.join(unknown)} (not in the pilot)" if unknown else "")
        + ". Logs and benchmarks add little.",
        "",
        *(
            [
                "Group jobs (each one submission, counted at its first job's rule): "
                + "; ".join(f"{g}: {n} holding {m} jobs" for g, (n, m) in groups.items())
                + ".",
                "",
            ]
            if groups
            else []
        ),
        f"Scale from the pilot: {images[1]:,.0f} images over the pilot's {images[0]:,.0f}, "
        f"{questions[1]:,.0f} questions over the pilot's {questions[0]:,.0f}. Assumption: "
        "each output of a rule holds the pilot's mean bytes per output of that rule, "
        "times the images ratio for rules that write images, once for checkpoints and "
        "the report, else times the questions ratio (an over-estimate for per-model "
        "summaries, which do not grow with questions).",
        "",
        gpu_block.rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"

"""What a study will take in GPU-hours per model, and in wall time on N GPUs
(``vqarobust gpu-hours``), before it runs.

Each run_model job of the target's plan (one per model, or per model and subset, as
``inference_jobs`` cuts them: :func:`vqarobust.cost_estimate.target_jobs`) takes GPU time
from one of two sources:

* a throughput table (:mod:`vqarobust.throughput`): every subset asks the target's
  questions at each of its severities, at the measured questions per second of the row
  that stands for the model's entry (:func:`vqarobust.throughput.pick_row`); the table
  measures answering, not loading weights;
* a finished pilot run on the user's own GPU (:mod:`vqarobust.cost_estimate`): its
  GPU-seconds per question scaled to the target's cells, plus the pilot's mean load time
  per job.

A model neither source covers is unknown, never zero: its GPU-hours and its jobs are in
no sum. The known jobs are scheduled on N GPUs longest first, each to the GPU that frees
up first (LPT, within 4/3 of the shortest possible wall time); the wall time printed is
that schedule's, beside the lower bound max(longest job, GPU-hours / N).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vqarobust.cost_estimate import Pilot, estimate_cells, target_cells, target_jobs
from vqarobust.throughput import Table, match_model, pick_row

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan

ON_CPU = "runs on the CPU"


@dataclass(frozen=True)
class Priced:
    """How one target model is priced: the source's model it is priced from, the
    setting in words, GPU-seconds per (subset, severity) question cell by subset (None
    where unknown), load seconds per job, and why it is unknown (None when known)."""

    model: str
    source: str | None
    setting: str
    cells: dict[str, float | None]
    questions: dict[str, int]
    load_s: float
    unknown: str | None = None


@dataclass(frozen=True)
class Job:
    """One run_model job: its model, its subsets and its GPU-seconds (None: unknown)."""

    model: str
    subsets: tuple[str, ...]
    seconds: float | None


def _levels(plan: StudyPlan, subset: str) -> int | None:
    severities = plan.catalogue[subset].severities
    return None if severities is None else len(severities)


def from_table(
    plan: StudyPlan,
    table: Table,
    questions: int,
    mapping: Mapping[str, str] | None = None,
    fastest: bool = False,
    repository: Mapping[str, Any] | None = None,
) -> list[Priced]:
    """Each target model priced from ``table``: ``mapping`` names a table model for a
    target model; else :func:`vqarobust.throughput.match_model` finds one."""
    if repository is None:
        from vqarobust.models.repository import read_repository

        repository = read_repository()
    mapping = dict(mapping or {})
    out = []
    subsets: dict[str, list[str]] = {}
    for model, subset in target_cells(plan):
        subsets.setdefault(model, []).append(subset.name)
    for model, names in subsets.items():
        entry = plan.config["models"][model]
        counts = {s: questions * (_levels(plan, s) or 0) for s in names}
        if entry.get("device") == "cpu":
            out.append(Priced(model, None, ON_CPU, dict.fromkeys(names, 0.0), counts, 0.0))
            continue
        source = mapping.get(model) or match_model(model, entry, table, repository)
        if source is None or source not in table.models:
            why = f"not in {table.path or 'the table'}"
            out.append(Priced(model, source, why, dict.fromkeys(names), counts, 0.0, why))
            continue
        row = pick_row(table, source, entry, fastest)
        cells: dict[str, float | None] = {}
        for s in names:
            levels = _levels(plan, s)
            cells[s] = None if levels is None else questions * levels / row.questions_per_s
        why = None if all(v is not None for v in cells.values()) else "severities unknown"
        setting = f"{row.setting()}: {row.questions_per_s:g} questions/s"
        out.append(Priced(model, source, setting, cells, counts, 0.0, why))
    return out


def from_pilot(
    plan: StudyPlan, pilot: Pilot, questions: int, mapping: Mapping[str, str] | None = None
) -> list[Priced]:
    """Each target model priced from a pilot's GPU-seconds per question
    (:func:`vqarobust.cost_estimate.estimate_cells`) and its mean load time per job."""
    from vqarobust.cost_estimate import load_seconds

    cells = estimate_cells(pilot, plan, questions, dict(mapping or {}))
    loads = load_seconds(pilot)
    out = []
    for (model,), group in cells.group_by("model", maintain_order=True):
        source = group["pilot_model"][0]
        entry = plan.config["models"][model]
        names = group["subset"].to_list()
        counts = dict(zip(names, group["questions"].to_list(), strict=True))
        if entry.get("device") == "cpu":
            out.append(Priced(model, None, ON_CPU, dict.fromkeys(names, 0.0), counts, 0.0))
            continue
        gpu = dict(zip(names, group["gpu_s"].to_list(), strict=True))
        known = sum(v is not None for v in gpu.values())
        setting = f"pilot, {known} of {len(names)} subsets"
        if source not in loads:
            setting += ", no load time"  # the pilot recorded none: its jobs exclude loading
        why = None
        if source not in set(pilot.costs["model"]):
            why = "not in the pilot"
        elif known < len(names):
            missing = group.filter(group["gpu_s"].is_null())
            scaled = missing["basis"].is_in(["same subset", "same modality"])
            why = (
                "no GPU-seconds in the pilot (it ran on the CPU)"
                if scaled.all()
                else f"{int((~scaled).sum())} subsets without a pilot cell"
            )
        out.append(Priced(model, source, setting, gpu, counts, loads.get(source, 0.0), why))
    return out


def jobs(plan: StudyPlan, priced: Sequence[Priced], per_model: bool | None = None) -> list[Job]:
    """The target's run_model jobs on a GPU with their GPU-seconds: their cells' sum
    plus one load, None when a cell is unknown; ``per_model`` cuts them as
    ``inference_jobs: model`` (True) or ``subset`` (False) would, not as the config does."""
    by_model = {p.model: p for p in priced}
    out = []
    for model, subsets in target_jobs(plan, per_model):
        p = by_model[model]
        if p.setting == ON_CPU:
            continue
        known = [c for s in subsets if (c := p.cells[s]) is not None]
        seconds = sum(known) + p.load_s if len(known) == len(subsets) else None
        out.append(Job(model, tuple(subsets), seconds))
    return out


def schedule(durations: Sequence[float], gpus: int) -> tuple[float, list[list[int]]]:
    """Longest-processing-time-first: the jobs (by index into ``durations``), longest
    first, each to the GPU with the least work so far (the lowest-numbered on a tie);
    the makespan and each GPU's jobs."""
    if gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {gpus}")
    heap = [(0.0, g) for g in range(gpus)]
    assigned: list[list[int]] = [[] for _ in range(gpus)]
    for i in sorted(range(len(durations)), key=lambda i: (-durations[i], i)):
        load, g = heapq.heappop(heap)
        assigned[g].append(i)
        heapq.heappush(heap, (load + durations[i], g))
    return max(load for load, _ in heap), assigned


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    h = seconds / 3600
    return f"{h:.1f}" if h >= 10 else f"{h:.2f}"


def to_markdown(
    plan: StudyPlan,
    priced: Sequence[Priced],
    gpus: int,
    questions: tuple[int, str],
    source_lines: Sequence[str],
    command: str,
    flag: str,
) -> str:
    """The estimate: a row per model (then their sums), the wall time on ``gpus`` GPUs
    and its schedule, the assumption and what is unknown (``flag`` maps a model to a
    measured one)."""
    all_jobs = jobs(plan, priced)
    lines = [
        f"<!-- {command} -->",
        "",
        "| model | priced from | setting | questions | jobs | GPU-hours |",
        "|---|---|---|---|---|---|",
    ]
    total_q = 0
    for p in priced:
        mine = [j for j in all_jobs if j.model == p.model]
        seconds = (
            None
            if p.unknown or any(j.seconds is None for j in mine)
            else (sum(j.seconds or 0.0 for j in mine))
        )
        n = sum(p.questions.values())
        total_q += n
        gpu = "- (CPU)" if p.setting == ON_CPU else _hours(seconds)
        lines.append(
            f"| {p.model} | {p.source or '-'} | {p.setting} | {n:,} | {len(mine)} | {gpu} |"
        )
    known = [j for j in all_jobs if j.seconds is not None]
    unknown = [j for j in all_jobs if j.seconds is None]
    total = sum(j.seconds or 0.0 for j in known)
    lines.append(
        f"| total (known) | | | {total_q:,} | {len(known)} of {len(all_jobs)} | "
        f"{_hours(total if known else None)} |"
    )
    gpus_word = f"{gpus} GPU{'s' if gpus != 1 else ''}"
    lines.append("")
    if not known:
        lines.append(f"Wall time on {gpus_word}: unknown (no job's GPU time is known).")
    else:
        span, assigned = schedule([j.seconds or 0.0 for j in known], gpus)
        bound = max(max(j.seconds or 0.0 for j in known), total / gpus)
        lines.append(
            f"Wall time on {gpus_word}: {_hours(span)} hours for the {len(known)} known "
            "jobs, longest first, each to the GPU that frees up first (no schedule is "
            f"shorter than {_hours(bound)} hours: the longest job, or the GPU-hours / {gpus})."
        )
        if unknown:
            lines[-1] += f" The {len(unknown)} unknown jobs would add to it."
        for g, idx in enumerate(assigned):
            if idx:
                names = ", ".join(_job_name(known[i], plan) for i in idx)
                work = _hours(sum(known[i].seconds or 0.0 for i in idx))
                lines.append(f"- GPU {g + 1} ({work} h): {names}")
        # The other cut of the same jobs: one job per model holds a GPU for all of its
        # subsets, so the slowest model alone can set the wall time.
        other = jobs(plan, priced, not plan.infer.per_model)
        other_span, _ = schedule([j.seconds for j in other if j.seconds is not None], gpus)
        cut = "subset" if plan.infer.per_model else "model"
        lines.append(
            f"- With inference_jobs: {cut} ({len(other)} GPU jobs) the known jobs would "
            f"take {_hours(other_span)} hours on {gpus_word}."
        )
    lines += ["", *source_lines, ""]
    lines.append(
        f"Questions: {questions[0]:,} per subset and severity ({questions[1]}); "
        f"inference_jobs: {plan.config['inference_jobs']} ({len(all_jobs)} GPU jobs)."
    )
    for p in priced:
        if p.unknown and p.unknown.startswith("not in"):
            lines.append(
                f"- Unknown: {p.model}, {p.unknown} ({flag} {p.model}=MEASURED prices it as "
                "a measured model)."
            )
        elif p.unknown:
            lines.append(f"- Unknown: {p.model}, {p.unknown}.")
    return "\n".join(lines) + "\n"


def _job_name(job: Job, plan: StudyPlan) -> str:
    return job.model if plan.infer.per_model else f"{job.model}/{job.subsets[0]}"


def table_lines(table: Table, fastest: bool) -> list[str]:
    """The throughput source and its assumption, in words."""
    how = (
        "each model's fastest measured setting (--fastest)"
        if fastest
        else "the measured row of the largest batch not above the entry's batch_size, with "
        "its image-feature reuse where measured"
    )
    return [
        f"Source: {table.path}, measured on {table.gpu} with torch {table.torch} and "
        f"transformers {table.transformers} by `{table.source}`.",
        "",
        "Assumption: every question of a subset is asked at each of its severities, at the "
        f"questions per second of {how}; loading the weights is not in the table (add a "
        "few minutes per job); the table's own assumptions (image size, answer length) "
        "hold for the target.",
    ]


def pilot_lines(pilot: Pilot) -> list[str]:
    """The pilot source and its assumption, in words."""
    return [
        f"Source: the pilot {pilot.source}.",
        "",
        "Assumption: a target cell (model x subset x severity) asks every question of the "
        "target dataset, at the pilot's same model's GPU-seconds per question on the same "
        "subset, else on its subsets of the same modality, on the pilot's GPU; each job adds "
        "the pilot's mean load time.",
    ]

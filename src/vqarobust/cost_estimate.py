"""What a study will cost, from a finished pilot's costs (``vqarobust cost-estimate``).

The pilot's table ``costs`` gives each model's cost per question on each subset; the
target study's plan (:class:`vqarobust.plan.StudyPlan`) gives its models, the subsets
each answers and their severities. A target cell (model x subset x severity) costs the
pilot's mean per question of the same model on the same subset (its severities pooled),
else on the subsets of the same modality, times the target's questions; a model the
pilot did not run, or a subset neither rule covers, is listed as unknown, never priced
at zero. Model loading adds the pilot's mean load time per load times the target's
run_model jobs. The target config's ``prices`` price the result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl
import pyarrow.parquet as pq

from vqarobust.costs import LOADS_SCHEMA, cost_rows, with_money

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan, Subset

# The measures scaled by the number of questions (peak memory is not a per-question cost).
SCALED = ("wall_s", "cpu_s", "gpu_s", "requests", "retries", "prompt_tokens", "completion_tokens")
BASES = (
    "same subset",
    "same modality",
    "no pilot cell",
    "model not in pilot",
    "severities unknown",
)
ASSUMPTION = (
    "Assumption: a target cell (model x subset x severity) asks every question of the "
    "target dataset, and each question costs what it cost the pilot's same model on average "
    "on the same subset (all severities pooled), else on the pilot's subsets of the same "
    "modality, on the pilot's hardware; model loading costs the pilot's mean load time per "
    "run_model job. Cells without such a pilot cell, and models absent from the pilot, are "
    "unknown and in no sum."
)


@dataclass(frozen=True)
class Pilot:
    """A finished run's costs and load times, and its questions per image where known."""

    costs: pl.DataFrame
    loads: pl.DataFrame
    questions_per_image: float | None
    source: str


def _from_database(path: Path) -> Pilot:
    with duckdb.connect(str(path), read_only=True) as con:
        names = {n for (n,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if "costs" not in names:
            raise ValueError(
                f"{path} has no table costs (a results file written before costs "
                "were recorded); rebuild it, or give the run's results folder"
            )
        costs = con.sql("SELECT * FROM costs").pl()
        loads = (
            con.sql("SELECT * FROM model_loads").pl()
            if "model_loads" in names
            else pl.DataFrame(schema=LOADS_SCHEMA)
        )
        per_image = None
        if "questions" in names:
            n, images = con.execute(
                "SELECT count(*), count(DISTINCT image_id) FROM questions"
            ).fetchone()
            per_image = n / images if images else None
    return Pilot(costs, loads, per_image, str(path))


def read_pilot(path: str | Path) -> Pilot:
    """A pilot from its results DuckDB file, or its results folder
    (``results/<dataset>``: its ``robustness.duckdb``, else its ``predictions/``)."""
    path = Path(path)
    if path.is_file():
        return _from_database(path)
    if (path / "robustness.duckdb").is_file():
        return _from_database(path / "robustness.duckdb")
    files = sorted((path / "predictions").glob("*/*.parquet"))
    if not files:
        raise ValueError(
            f"{path} is neither a results DuckDB file nor a results folder with "
            "robustness.duckdb or predictions/<model>/*.parquet"
        )
    costs, loads, _ = cost_rows(files)
    return Pilot(
        costs.with_columns(pl.lit(None, pl.String).alias("currency")), loads, None, str(path)
    )


def target_questions(plan: StudyPlan, given: int | None, pilot: Pilot) -> tuple[int, str]:
    """The target's number of questions, and where it comes from: ``given``, the target's
    prepared questions file, or its ``dataset.n_images`` times the pilot's questions per
    image."""
    return questions_from(plan, given, pilot.questions_per_image, "the pilot's")


def questions_from(
    plan: StudyPlan, given: int | None, per_image: float | None, whose: str
) -> tuple[int, str]:
    """The target's number of questions, and where it comes from: ``given``, the target's
    prepared questions file, or its ``dataset.n_images`` times ``per_image`` (``whose``
    questions per image, e.g. "the pilot's")."""
    if given is not None:
        return given, "given by --questions"
    if Path(plan.questions).is_file():
        n = pq.read_metadata(plan.questions).num_rows
        return n, f"the target's prepared questions ({plan.questions})"
    n_images = plan.config["dataset"].get("n_images")
    if n_images and per_image:
        n = round(n_images * per_image)
        return n, f"dataset.n_images {n_images} x {whose} {per_image:.3g} questions per image"
    raise ValueError(
        "the target's number of questions is unknown (no prepared questions "
        f"file at {plan.questions}, no dataset.n_images with {whose} questions per "
        "image): give --questions"
    )


def target_cells(plan: StudyPlan) -> list[tuple[str, Subset]]:
    """Every (model, subset) the target study answers, in the plan's order."""
    return [
        (model, plan.catalogue[name])
        for model in plan.model_names
        for name in plan.infer.model_subsets(model)
    ]


def target_jobs(plan: StudyPlan, per_model: bool | None = None) -> list[tuple[str, list[str]]]:
    """The target's run_model jobs: each one's model and the subsets it answers (all of
    the model's with ``inference_jobs: model``, else one; ``per_model`` overrides the
    config's choice)."""
    per_model = plan.infer.per_model if per_model is None else per_model
    out = []
    for model in plan.model_names:
        subsets = plan.infer.model_subsets(model)
        out += [(model, subsets)] if per_model else [(model, [s]) for s in subsets]
    return out


def per_question(costs: pl.DataFrame, by: list[str]) -> dict[tuple, dict[str, float | None]]:
    """Each measure's cost per question over the pilot's known cells grouped by ``by``:
    its sum over the cells where it is known divided by their questions (None where no
    cell knows it)."""
    known = costs.filter(pl.col("known"))
    exprs = []
    for m in SCALED:
        has = pl.col(m).is_not_null()
        asked = pl.col("questions").filter(has).sum()
        exprs.append(pl.when(has.any()).then(pl.col(m).sum() / asked).alias(m))
    rows = known.group_by(by).agg(exprs).iter_rows(named=True)
    return {tuple(r[k] for k in by): {m: r[m] for m in SCALED} for r in rows}


def _severities(pilot: pl.DataFrame, model: str, subset: str, levels: Any) -> int | None:
    if levels is not None:
        return len(levels)
    # A context subset's levels are its swap indices, known once its swaps are made: the
    # pilot's count of them for the same subset, where it has one.
    seen = pilot.filter((pl.col("model") == model) & (pl.col("perturbation") == subset))
    return seen["severity"].n_unique() or None


def estimate_cells(
    pilot: Pilot, plan: StudyPlan, questions: int, pilots: Mapping[str, str]
) -> pl.DataFrame:
    """One row per target model x subset: the pilot model it is scaled from, the basis
    (:data:`BASES`), its questions x severities and each measure's estimate."""
    exact = per_question(pilot.costs, ["model", "perturbation"])
    modal = per_question(pilot.costs, ["model", "modality"])
    ran = set(pilot.costs["model"])
    rows = []
    for model, subset in target_cells(plan):
        source = pilots.get(model, model)
        name = subset.name
        levels = _severities(pilot.costs, source, name, subset.severities)
        rate = exact.get((source, name))
        basis = "same subset"
        if rate is None:
            rate, basis = modal.get((source, subset.modality)), "same modality"
        if source not in ran:
            rate, basis = None, "model not in pilot"
        elif rate is None:
            basis = "no pilot cell"
        elif levels is None:
            rate, basis = None, "severities unknown"
        units = questions * (levels or 0)
        values = {m: (None if rate is None or rate[m] is None else rate[m] * units) for m in SCALED}
        rows.append(
            {
                "model": model,
                "pilot_model": source,
                "subset": name,
                "modality": subset.modality,
                "basis": basis,
                "questions": units,
                **values,
            }
        )
    schema = {
        "model": pl.String,
        "pilot_model": pl.String,
        "subset": pl.String,
        "modality": pl.String,
        "basis": pl.String,
        "questions": pl.Int64,
        **dict.fromkeys(SCALED, pl.Float64),
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def load_seconds(pilot: Pilot) -> dict[str, float]:
    """Each pilot model's mean load time per load (a job's outputs count it once)."""
    loads = pilot.loads.filter(pl.col("load_s").is_not_null()).unique(["model", "load_s"])
    means = loads.group_by("model").agg(pl.col("load_s").mean())
    return dict(means.iter_rows())


def estimate(
    pilot: Pilot,
    plan: StudyPlan,
    questions: int,
    pilots: Mapping[str, str] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per target model: the estimated hours, requests, tokens and money (the target
    config's prices), and its cells by basis; and the cells (:func:`estimate_cells`)."""
    pilots = dict(pilots or {})
    cells = estimate_cells(pilot, plan, questions, pilots)
    known = pl.col("basis").is_in(["same subset", "same modality"])

    def total(m: str) -> pl.Expr:
        return pl.when(pl.col(m).is_not_null().any()).then(pl.col(m).sum())

    per_model = cells.group_by("model", maintain_order=True).agg(
        pl.col("pilot_model").first(),
        pl.len().alias("cells"),
        known.sum().cast(pl.Int64).alias("estimated"),
        *[total(m).alias(m) for m in SCALED],
    )
    loads = load_seconds(pilot)
    jobs = {m: 0 for m in plan.model_names}
    for model, _ in target_jobs(plan):
        jobs[model] += 1
    per_model = per_model.with_columns(
        pl.struct("model", "pilot_model")
        .map_elements(
            lambda r: (
                loads[r["pilot_model"]] * jobs[r["model"]] if r["pilot_model"] in loads else None
            ),
            return_dtype=pl.Float64,
        )
        .alias("load_s"),
    )
    priced = with_money(per_model, plan.config.get("prices"))
    return priced, cells


def _cell(value: Any, scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unknown"
    x = value / scale
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"


# The printed columns after the model's: (header, column, scale).
COLUMNS = (
    ("GPU-hours", "gpu_s", 3600.0),
    ("CPU-hours", "cpu_s", 3600.0),
    ("wall hours", "wall_s", 3600.0),
    ("load hours", "load_s", 3600.0),
    ("requests", "requests", 1.0),
    ("prompt tokens", "prompt_tokens", 1.0),
    ("completion tokens", "completion_tokens", 1.0),
    ("money", "money", 1.0),
)


def _total(per_model: pl.DataFrame) -> dict[str, Any]:
    """The row of sums over the models (of the values that are known)."""
    row: dict[str, Any] = {
        "model": "total (known)",
        "pilot_model": "",
        "estimated": int(per_model["estimated"].sum()),
        "cells": int(per_model["cells"].sum()),
    }
    for _, column, _ in COLUMNS:
        known = per_model[column].drop_nulls()
        row[column] = float(known.sum()) if len(known) else None
    return row


def to_markdown(
    per_model: pl.DataFrame,
    cells: pl.DataFrame,
    questions: tuple[int, str],
    pilot: Pilot,
    command: str,
) -> str:
    """The estimate as a Markdown table (a row per model, then their sums) with its
    assumption and what it cannot estimate."""
    currency = next(iter(per_model["currency"].drop_nulls()), None)
    head = [
        "model",
        "from pilot model",
        "subsets estimated",
        *(f"money ({currency})" if c == "money" and currency else h for h, c, _ in COLUMNS),
    ]
    lines = [f"<!-- {command} -->", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in [*per_model.iter_rows(named=True), _total(per_model)]:
        row = [
            r["model"],
            r["pilot_model"],
            f"{r['estimated']} of {r['cells']}",
            *(_cell(r[c], scale) for _, c, scale in COLUMNS),
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        f"Pilot: {pilot.source}. Target questions: {questions[0]} ({questions[1]}).",
        "",
        ASSUMPTION,
    ]
    unknown = cells.filter(~pl.col("basis").is_in(["same subset", "same modality"]))
    for (model, basis), group in unknown.group_by("model", "basis", maintain_order=True):
        if basis == "model not in pilot":
            lines.append(
                f"- Unknown: {model}, not in the pilot (--model {model}=PILOT_MODEL "
                "scales it from another)."
            )
            continue
        names = ", ".join(group["subset"].head(5).to_list())
        more = f" and {group.height - 5} more" if group.height > 5 else ""
        lines.append(f"- Unknown: {model}, {group.height} subsets ({basis}): {names}{more}.")
    if currency is None:
        lines.append("- No money: the target config sets no prices.")
    return "\n".join(lines) + "\n"

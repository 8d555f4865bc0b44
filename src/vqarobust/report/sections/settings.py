"""The "Settings" section: the dataset, sizes, seed, scoring, VRE weights, R_score's
tolerance and maximum, and the versions, from ``run_info``."""

from __future__ import annotations

import json

import polars as pl

from vqarobust.report.sections.base import Data, Run, Section


def context(data: Data, run: Run) -> pl.DataFrame:
    """The (setting, value) table."""
    del data
    info, s = run.info, run.summary
    weights = json.loads(info.get("weights", '"uniform"'))
    rscore = json.loads(info.get("rscore", "{}"))
    rows = [
        (
            "dataset",
            f"{info.get('dataset.adapter', '?')} "
            f"({info.get('dataset.split', info.get('dataset.questions', ''))})".strip(),
        ),
        ("images / questions", f"{s.n_images:,} / {s.n_questions:,}"),
        ("seed", info.get("dataset.seed", "?")),
        ("scoring", info.get("metric", "?")),
        (
            "VRE weights",
            "uniform (0.2 each)"
            if weights == "uniform" or len(set(weights.values())) == 1
            else ", ".join(f"{k} {v:.2f}" for k, v in weights.items()),
        ),
        ("R_score t, m (points)", f"{rscore.get('tolerance', '?')}, {rscore.get('maximum', '?')}"),
    ]
    rows += [(k.removeprefix("version."), v) for k, v in info.items() if k.startswith("version.")]
    return pl.DataFrame(rows, schema=["setting", "value"], orient="row")


SECTION = Section("settings", (), context)

"""What a rerun of the finished default study costs after one change of its config: the
jobs Snakemake plans and the wall time of the rerun, per change (docs/workflow.md, "What
reruns when").

    .venv/bin/python benchmarks/rerun_costs.py CHECKOUT [--only TEXT]

CHECKOUT is a checkout whose default study has finished (``.venv/bin/snakemake`` there).
Each change runs on its own copy of it (the finished run included), so the changes do not
add up: editing one model's entry (vilt-tiny's ``dtype`` from ``auto`` to ``float32``,
which is what ``auto`` resolves to on the CPU: every job of the model reruns, and its
finished chunks are reused by content), adding one corruption (``glass_blur``), adding
one severity (the corruptions at 1-4 first, then 5 added), changing one metric setting
(``rscore.tolerance``) and the attention maps' sample (``diagnostics.attention.n``).
``--only`` keeps the changes whose label contains TEXT. Run it with the Python of the
checkout's own environment, whose ``snakemake`` it runs. Prints a Markdown table: change,
jobs by rule, wall time.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

Config = dict[str, Any]


def _model_entry(c: Config) -> None:
    c["models"]["vilt-tiny"]["dtype"] = "float32"


def _corruption(c: Config) -> None:
    c["corruptions"].append("glass_blur")


def _severity(c: Config) -> None:
    c["severities"] = [1, 2, 3, 4, 5]


def _metric(c: Config) -> None:
    c["rscore"]["tolerance"] = 0.1


def _attention(c: Config) -> None:
    c.setdefault("diagnostics", {}).setdefault("attention", {})["n"] = 20


CHANGES: list[tuple[str, Callable[[Config], None]]] = [
    ("one model's entry (vilt-tiny `dtype: float32`)", _model_entry),
    ("one corruption added (`glass_blur`)", _corruption),
    ("one severity added (5, to 1-4)", _severity),
    ("one metric setting (`rscore.tolerance: 0.1`)", _metric),
    ("the attention maps' sample (`diagnostics.attention.n: 20`)", _attention),
]


def _snakemake(workdir: Path) -> tuple[Counter, float]:
    """Run the workflow in ``workdir``; the jobs it ran, by rule, and its wall time."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "--cores", "2"],
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"snakemake failed in {workdir}:\n{done.stderr[-3000:]}")
    return Counter(re.findall(r"^(?:local)?rule (\w+):", done.stderr, flags=re.M)), wall


def main(checkout: str, only: str = "") -> None:
    source = Path(checkout).resolve()
    if not (source / "results" / "easy-vqa" / "robustness.duckdb").is_file():
        raise SystemExit(f"{source}: run the default study there first")
    rows = []
    for label, change in CHANGES:
        if only not in label:
            continue
        with tempfile.TemporaryDirectory(dir=source.parent) as tmp:
            copy = Path(tmp) / "copy"
            shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns(".venv"))
            path = copy / "config" / "config.yaml"
            config = yaml.safe_load(path.read_text())
            if change is _severity:
                # The finished run had 1-5: first a run at 1-4 (its jobs keep their chunks
                # of 1-4), then the change adds 5 back.
                config["severities"] = [1, 2, 3, 4]
                path.write_text(yaml.safe_dump(config))
                _snakemake(copy)
            change(config)
            path.write_text(yaml.safe_dump(config))
            jobs, wall = _snakemake(copy)
            named = ", ".join(f"{rule} {n}" for rule, n in sorted(jobs.items()) if rule != "all")
            rows.append((label, sum(n for r, n in jobs.items() if r != "all"), named, wall))
    print("| change | jobs | by rule | wall |")
    print("|---|---|---|---|")
    for label, n, named, wall in rows:
        print(f"| {label} | {n} | {named} | {wall:.0f} s |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout")
    parser.add_argument("--only", default="", help="the changes whose label contains this")
    args = parser.parse_args()
    main(args.checkout, args.only)

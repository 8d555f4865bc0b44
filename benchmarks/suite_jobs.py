"""Where the test suite's Snakemake jobs spend their CPU: every job's benchmark file
(``benchmarks/out/<dataset>/<rule>/...tsv``, written by the workflow) under a finished
pytest session's base folder, summed by rule.

    .venv/bin/python benchmarks/suite_jobs.py [BASETEMP]

BASETEMP defaults to pytest's newest session folder (``/tmp/pytest-of-<user>/
pytest-current``); pytest keeps the last three. A folder reached twice through a link
counts once. Snakemake samples a job's processes, so a job of well under a second may
read 0 s.
"""

from __future__ import annotations

import argparse
import csv
import getpass
import os
import tempfile
from pathlib import Path


def job_rows(base: Path) -> list[tuple[str, float]]:
    """(rule, CPU seconds) of every job benchmark file under ``base``, each file once."""
    seen: set[str] = set()
    rows = []
    for path in sorted(base.rglob("benchmarks/out/*/*")):
        files = [path] if path.is_file() else sorted(path.rglob("*.tsv"))
        rule = path.name.removesuffix(".tsv")
        for tsv in files:
            real = os.path.realpath(tsv)
            if real in seen or tsv.suffix != ".tsv":
                continue
            seen.add(real)
            with tsv.open() as fh:
                records = list(csv.DictReader(fh, delimiter="\t"))
            if records:
                rows.append((rule, float(records[-1].get("cpu_time") or 0.0)))
    return rows


def to_markdown(rows: list[tuple[str, float]]) -> str:
    """A table of jobs and CPU seconds by rule, costliest first, and the totals."""
    by_rule: dict[str, list[float]] = {}
    for rule, cpu in rows:
        by_rule.setdefault(rule, []).append(cpu)
    lines = ["| rule | jobs | CPU s | per job |", "|---|---|---|---|"]
    for rule, cpus in sorted(by_rule.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {rule} | {len(cpus)} | {sum(cpus):.0f} | {sum(cpus) / len(cpus):.2f} |")
    total = sum(cpu for _, cpu in rows)
    lines.append(f"| total | {len(rows)} | {total:.0f} | |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}" / "pytest-current"
    parser.add_argument("basetemp", nargs="?", type=Path, default=default)
    args = parser.parse_args()
    rows = job_rows(args.basetemp.resolve())
    if not rows:
        raise SystemExit(f"no job benchmark files under {args.basetemp}")
    print(f"<!-- benchmarks/suite_jobs.py {args.basetemp.resolve()} -->\n")
    print(to_markdown(rows), end="")


if __name__ == "__main__":
    main()

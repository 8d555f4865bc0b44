"""Where the test suite's Snakemake jobs spend their CPU: every job's benchmark file
(``benchmarks/out/<dataset>/<rule>/...tsv``, written by the workflow) under a finished
pytest session's base folder, summed by rule.

    .venv/bin/python benchmarks/suite_jobs.py [BASETEMP]

BASETEMP defaults to pytest's newest session folder (``/tmp/pytest-of-<user>/
pytest-current``); pytest keeps the last three. A folder reached twice through a link
counts once, and so does a copied one; a link out of BASETEMP (into a checkout) is not
followed. Snakemake samples a job's processes, so a job of well under a second may read
0 s.
"""

from __future__ import annotations

import argparse
import csv
import getpass
import tempfile
from pathlib import Path


def job_rows(base: Path) -> list[tuple[str, float]]:
    """(rule, CPU seconds) of every job benchmark file under ``base``, each job once: a
    file reached twice through a link, or copied with its run (tests copy the session's
    tiny run to change it), counts once: by its place in its run's ``benchmarks/out``
    (the job) and its content (its times and memory)."""
    seen: set[tuple[str, bytes]] = set()
    rows, root = [], base.resolve()
    for path in sorted(base.rglob("benchmarks/out/*/*")):
        files = [path] if path.is_file() else sorted(path.rglob("*.tsv"))
        rule = path.name.removesuffix(".tsv")
        for tsv in files:
            # A test's folder may link into the checkout, whose own run is no test's.
            if tsv.suffix != ".tsv" or not tsv.resolve().is_relative_to(root):
                continue
            data = tsv.read_bytes()
            job = (tsv.relative_to(path.parents[1]).as_posix(), data)  # under out/
            if job in seen:
                continue
            seen.add(job)
            records = list(csv.DictReader(data.decode().splitlines(), delimiter="\t"))
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

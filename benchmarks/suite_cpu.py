"""Where the test suite spends its CPU, test by test: a pytest plugin that records each
test's CPU time (its own process's, and that of the processes it started and waited for:
Snakemake runs and their jobs), and a summary of the records.

    mkdir /tmp/suite-cpu
    SUITE_CPU=/tmp/suite-cpu PYTHONPATH=benchmarks \\
        .venv/bin/python -m pytest -p suite_cpu -m "slow or not slow"
    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite-cpu

Each pytest process (each xdist worker) writes one JSON-lines file into ``$SUITE_CPU``.
A fixture's work counts for the first test that asks for it (the session's tiny run for
whichever test builds it); a process that outlives its test (a server a module fixture
started) counts when it is waited for. Work of processes nobody waits for (SLURM's jobs,
which slurmd starts) is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    folder = os.environ.get("SUITE_CPU")
    own, children = _cpu()
    start = time.monotonic()
    yield
    if not folder:
        return
    own_after, children_after = _cpu()
    record = {
        "id": item.nodeid,
        "self": own_after - own,
        "children": children_after - children,
        "wall": time.monotonic() - start,
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with (Path(folder) / f"{worker}-{os.getpid()}.jsonl").open("a") as fh:
        fh.write(json.dumps(record) + "\n")


def read(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The records of each file (one per pytest process) in ``folder``."""
    return {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line]
        for path in sorted(folder.glob("*.jsonl"))
    }


def to_markdown(records: dict[str, list[dict[str, Any]]], top: int) -> str:
    """Each process's tests, wall and CPU time, then the ``top`` tests by CPU time."""
    lines = ["| process | tests | wall s | CPU s |", "|---|---|---|---|"]
    for name, rows in records.items():
        wall = sum(r["wall"] for r in rows)
        cpu = sum(r["self"] + r["children"] for r in rows)
        lines.append(f"| {name} | {len(rows)} | {wall:.0f} | {cpu:.0f} |")
    every = [r for rows in records.values() for r in rows]
    total = sum(r["self"] + r["children"] for r in every)
    lines += ["", f"CPU of all tests: {total:.0f} s", ""]
    lines += ["| test | CPU s | wall s |", "|---|---|---|"]
    for r in sorted(every, key=lambda r: -(r["self"] + r["children"]))[:top]:
        lines.append(f"| `{r['id']}` | {r['self'] + r['children']:.1f} | {r['wall']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the folder $SUITE_CPU named")
    parser.add_argument("--top", type=int, default=20, help="how many tests to list")
    args = parser.parse_args()
    records = read(args.folder)
    if not records:
        raise SystemExit(f"no records under {args.folder}")
    print(to_markdown(records, args.top), end="")


if __name__ == "__main__":
    main()

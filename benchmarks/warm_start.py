"""The tiny config (tests/data/tiny_config.yaml) run twice from scratch, cold
(``warm_start: false``) then warm, one after the other: wall time and CPU time (the
whole process tree) of each, and whether their DuckDB tables are equal.

    .venv/bin/python benchmarks/warm_start.py [WORKDIR]

docs/workflow.md, "Warm start", quotes its output.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from vqarobust.provenance import diff  # noqa: E402


def run(workdir: Path, config: dict) -> tuple[float, float]:
    """Wall and CPU seconds of ``snakemake --cores 2`` on ``config`` in ``workdir``."""
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d",
                    str(workdir), "--cores", "2", "--quiet"], check=True,
                   capture_output=True)  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(root: str | None = None) -> None:
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    base = Path(root or tempfile.mkdtemp(prefix="warm-start-"))
    times = {}
    for name, warm in (("cold", False), ("warm", True)):
        times[name] = run(base / name, {**config, "warm_start": warm})
        print(f"{name}: {times[name][0]:.1f} s wall, {times[name][1]:.1f} s CPU", flush=True)
    db = Path("results") / "easy-vqa" / "robustness.duckdb"
    result = diff(base / "cold" / db, base / "warm" / db)
    same = not result["tables"] and not result["only_in_a"] and not result["only_in_b"]
    print(f"tables equal: {same}; warm/cold wall {times['warm'][0] / times['cold'][0]:.2f}, "
          f"CPU {times['warm'][1] / times['cold'][1]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:])

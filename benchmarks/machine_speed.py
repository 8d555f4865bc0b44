"""How fast this machine is right now, to put beside a timing taken on it: the CPU
seconds of a fixed pure-Python loop and of ``import torch`` in a fresh interpreter,
medians of ``--repeats`` runs. This project's 2-core machines run on shared hosts
whose speed drifts by more than most changes save (docs/performance.md, "Whole-study
tests build what they read"), so a suite or main-job time means little without the
machine's speed at that hour; run this just before and just after the timing:

    .venv/bin/python benchmarks/machine_speed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# Ten million multiply-adds of Python ints: interpreter work alone, no library, no I/O.
LOOP = """
import resource
s = 0
for i in range(10_000_000):
    s += i * i
r = resource.getrusage(resource.RUSAGE_SELF)
print(r.ru_utime + r.ru_stime)
"""
TORCH = """
import resource
import torch
r = resource.getrusage(resource.RUSAGE_SELF)
print(r.ru_utime + r.ru_stime)
"""


def cpu_seconds(code: str) -> float:
    """The CPU that a fresh interpreter spent running ``code`` (as it measures itself)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    loop = [cpu_seconds(LOOP) for _ in range(args.repeats)]
    torch = [cpu_seconds(TORCH) for _ in range(args.repeats)]
    print(
        json.dumps(
            {
                "python_loop_cpu_s": round(statistics.median(loop), 2),
                "import_torch_cpu_s": round(statistics.median(torch), 2),
                "repeats": args.repeats,
            }
        )
    )


if __name__ == "__main__":
    main()

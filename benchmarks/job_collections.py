"""What the garbage collector costs a job process, with and without the pause every
workflow script makes (``gc.disable()`` before its imports, ``gc.freeze()`` and
``gc.enable()`` in :func:`vqarobust.jobs.start_job`; docs/performance.md, "Collections in
job processes").

Each case runs in fresh interpreters, as a job does, alternating between the two ways;
a case's CPU is the process's user + system time, exit included, and "before exit" is
what the process had spent when its last line ran (the rest is the interpreter's
shutdown). Each column is the median of ``--repeats`` runs per way:

    .venv/bin/python benchmarks/job_collections.py [--repeats 6]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

# What the heaviest jobs import and do first: the sentence encoder (embed_pool,
# embed_questions, the context jobs' class names), and torch with the inference module
# (every run_model job).
CASES = {
    "sentence encoder: import, encode two sentences": (
        "import sentence_transformers, torch",
        "from vqarobust.text.encoder import encode\n"
        "encode(['what colour is the shape?', 'is there a circle?'])",
    ),
    "torch and the inference module": ("import torch, vqarobust.inference", ""),
    "an analysis job's imports": (
        "import polars, duckdb, vqarobust.analyses.registry, vqarobust.analyses.runner",
        "",
    ),
}

LAST = "import json, resource\nr = resource.getrusage(resource.RUSAGE_SELF)\n"
LAST += "print(json.dumps(r.ru_utime + r.ru_stime))\n"


def program(imports: str, work: str, paused: bool) -> str:
    """A job-like process: the imports (with the collector off, then frozen, when
    ``paused``), the work, and its CPU so far printed last."""
    if paused:
        body = f"import gc\ngc.disable()\n{imports}\ngc.freeze()\ngc.enable()\n"
    else:
        body = f"{imports}\n"
    return body + work + "\n" + LAST


def measure(code: str) -> tuple[float, float]:
    """(CPU of the whole process, CPU before its interpreter's shutdown)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return total, float(json.loads(proc.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    print("| process | collector | CPU s | before shutdown | shutdown |")
    print("|---|---|---|---|---|")
    for name, (imports, work) in CASES.items():
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.repeats):
            for paused in (False, True):
                runs[paused].append(measure(program(imports, work, paused)))
        for paused in (False, True):
            total = statistics.median(t for t, _ in runs[paused])
            before = statistics.median(b for _, b in runs[paused])
            shutdown = statistics.median(t - b for t, b in runs[paused])
            way = "paused for the imports" if paused else "as Python runs it"
            print(f"| {name} | {way} | {total:.2f} | {before:.2f} | {shutdown:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

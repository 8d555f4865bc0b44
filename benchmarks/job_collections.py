"""What the garbage collector costs a job process, with and without the pause every
workflow script makes (``gc.disable()`` before its imports, ``gc.freeze()`` and
``gc.enable()`` in :func:`vqarobust.jobs.start_job`; docs/performance.md, "Collections in
job processes").

Each case runs in fresh interpreters, as a job does, alternating between the two ways;
a case's CPU is the process's user + system time, exit included, and "before shutdown"
is what the process had spent when its last line ran (the rest is the interpreter's
shutdown). Snakemake's own preamble (unpickling the job) and the rest of start_job are
left out of both ways. Each column is the median of ``--repeats`` runs per way:

    .venv/bin/python benchmarks/job_collections.py [--repeats 6]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

# Jobs as their scripts run them: the imports before start_job (paused or not),
# then the work, which imports what the package loads lazily with the collector on
# either way (the encoder's sentence-transformers, a model family's transformers).
CASES = {
    "embed_pool: its imports, then two sentences encoded": (
        "import torch\n"
        "from vqarobust.materialize.questions import build_pool\n"
        "from vqarobust.text.encoder import encode",
        "encode(['what colour is the shape?', 'is there a circle?'])",
    ),
    # Not what a job does today: sentence-transformers imported before start_job, as a
    # pause around the package's lazy imports would have it.
    "embed_pool with sentence-transformers imported up front": (
        "import torch, sentence_transformers\n"
        "from vqarobust.materialize.questions import build_pool\n"
        "from vqarobust.text.encoder import encode",
        "encode(['what colour is the shape?', 'is there a circle?'])",
    ),
    "run_model: its imports": ("import torch, vqarobust.inference, vqarobust.models", ""),
    "analyze: its imports": (
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

"""What the garbage collector costs a job process, with and without the pauses the
workflow makes: every script's imports (``gc.disable()`` before them, then
:func:`vqarobust.collector.freeze_imports` in :func:`vqarobust.jobs.start_job`), and the
package's lazy imports of heavy code (:func:`vqarobust.collector.imports_paused` where a
model family's adapter, a trained architecture or the sentence encoder loads;
docs/performance.md, "Collections in job processes").

Each case runs in fresh interpreters, as a job does, alternating between the ways;
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

# Jobs as their scripts run them: the imports before start_job, then what the package
# imports lazily when the job loads its encoder or model (in the package, inside
# imports_paused), then the work (none: the package's own calls would pause their
# imports in every way that freezes the script's).
CASES = {
    "embed_pool: imports, then sentence-transformers (the encoder's)": (
        "import torch\n"
        "from vqarobust.materialize.questions import build_pool\n"
        "from vqarobust.text.encoder import encode",
        "import sentence_transformers",
        "",
    ),
    "run_model: imports, then the vqa-classifier family's adapter": (
        "import torch, vqarobust.inference, vqarobust.models",
        "import vqarobust.models.classifier",
        "",
    ),
    "analyze: its imports": (
        "import polars, duckdb, vqarobust.analyses.registry, vqarobust.analyses.runner",
        "",
        "",
    ),
}

LAST = "import json, resource\nr = resource.getrusage(resource.RUSAGE_SELF)\n"
LAST += "print(json.dumps(r.ru_utime + r.ru_stime))\n"


# The ways a job can run, as the table names them: no pause; the script's imports paused
# (219cfee); those and the package's lazy imports paused (a93ee95).
WAYS = {
    "as Python runs it": (False, False),
    "its imports paused": (True, False),
    "lazy imports paused too": (True, True),
}


def program(imports: str, lazy: str, work: str, way: tuple[bool, bool]) -> str:
    """A job-like process: the imports (with the collector off, then frozen, when the
    way pauses them), the lazy imports (inside ``imports_paused`` when the way pauses
    them), the work, and its CPU so far printed last."""
    scripts, lazies = way
    if not scripts:
        return f"{imports}\n{lazy}\n{work}\n{LAST}"
    body = "import gc\ngc.disable()\n" + imports + "\n"
    body += "from vqarobust.collector import freeze_imports, imports_paused\nfreeze_imports()\n"
    if lazy and lazies:
        body += f"with imports_paused():\n    {lazy}\n"
    elif lazy:
        body += f"{lazy}\n"
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
    for name, (imports, lazy, work) in CASES.items():
        # Without lazy imports the third way is the second.
        ways = {w: way for w, way in WAYS.items() if lazy or not way[1]}
        runs: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
        for _ in range(args.repeats):
            for w, way in ways.items():
                runs[w].append(measure(program(imports, lazy, work, way)))
        for w in ways:
            total = statistics.median(t for t, _ in runs[w])
            before = statistics.median(b for _, b in runs[w])
            shutdown = statistics.median(t - b for t, b in runs[w])
            print(f"| {name} | {w} | {total:.2f} | {before:.2f} | {shutdown:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

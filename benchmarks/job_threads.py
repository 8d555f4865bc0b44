"""Whether a model's one inference job would end sooner on more torch threads: one
reference model answers a few subsets of a finished default study (the clean images'
severities of ``gaussian_noise`` and of the ``keyboard`` question set) in a fresh
process per (threads, batch size), as a ``run_model`` job does, its imports and its
weight load included (after one warm-up job), and the answers are checked equal across
thread counts, ways and batch sizes. Two ways to use the threads: ``torch``, one batch at
a time on that many torch (intra-op) threads; ``chunks``, as a ``run_model`` job of that
many threads does (``vqarobust.inference.job_workers``: that many chunks at once, each on
its own thread with one torch thread, for an adapter that allows it). The thread variables
(``OMP_NUM_THREADS`` and the like) are the caller's.

    .venv/bin/python benchmarks/job_threads.py CHECKOUT [--model vilt-tiny]
        [--threads 1 2] [--ways torch chunks] [--batch-sizes 64 256 1024]
        [--severities 1 2]

CHECKOUT is a checkout whose default study has finished (``.venv/bin/snakemake``
there). Prints a Markdown table: threads, way, batch size, questions, wall and CPU
seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run in a fresh interpreter: a job's process imports torch and the adapter itself.
JOB = """
import json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
import torch
from vqarobust.inference import Subset, run_model_job
from vqarobust.models import ModelRef
import pyarrow.parquet as pq

args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
root, data = args["checkout"], args["checkout"] + "/resources/datasets/easy-vqa/eval"
spec = {"family": "vqa-classifier", "device": "cpu",
        "path_or_id": root + "/checkpoints/easy-vqa/" + args["model"]}
ref = ModelRef(args["model"], spec, options={"batch_size": args["batch_size"]})
images = [Subset("gaussian_noise", s, f"{root}/results/easy-vqa/images/gaussian_noise/{s}")
          for s in args["severities"]]
texts = [Subset("keyboard", s, data + "/images", "text",
                f"{root}/results/easy-vqa/questions/keyboard/{s}.parquet")
         for s in args["severities"]]
out = args["out"]
run_model_job(ref, data + "/questions.parquet",
              [(images, out + "/images.parquet"), (texts, out + "/texts.parquet")],
              threads=args["threads"] if args["way"] == "chunks" else 1)
answers = [pq.read_table(out + f"/{n}.parquet").column("answer").to_pylist()
           for n in ("images", "texts")]
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "answers": answers}))
"""


def run_job(
    checkout: Path, model: str, threads: int, way: str, batch_size: int, severities: list[int]
) -> dict[str, Any]:
    """One job's wall and CPU seconds and its answers."""
    with tempfile.TemporaryDirectory(prefix="job-threads-") as out:
        args = {
            "checkout": str(checkout.resolve()),
            "model": model,
            "threads": threads,
            "way": way,
            "batch_size": batch_size,
            "severities": severities,
            "out": out,
        }
        done = subprocess.run(
            [sys.executable, "-c", JOB, json.dumps(args)], capture_output=True, text=True
        )
    if done.returncode:
        raise SystemExit(f"the job failed ({threads} threads, {way}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--model", default="vilt-tiny")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--ways", nargs="+", choices=["torch", "chunks"], default=["torch", "chunks"]
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--severities", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    print(f"{args.model}: `gaussian_noise` and `keyboard` at severities {args.severities}\n")
    print("| threads | way | batch size | questions | wall s | CPU s |")
    print("|---|---|---|---|---|---|")
    # Not reported: the first process reads torch's libraries from disk.
    reference = run_job(
        args.checkout, args.model, 1, "torch", args.batch_sizes[0], args.severities
    )["answers"]
    for batch_size in args.batch_sizes:
        for threads in args.threads:
            # One thread is the same job either way.
            for way in args.ways if threads > 1 else args.ways[:1]:
                job = run_job(args.checkout, args.model, threads, way, batch_size, args.severities)
                if job["answers"] != reference:
                    raise SystemExit(
                        f"answers differ with {threads} threads ({way}), batch {batch_size}"
                    )
                n = sum(len(a) for a in job["answers"])
                wall, cpu = job["wall"], job["cpu"]
                print(f"| {threads} | {way} | {batch_size} | {n:,} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()

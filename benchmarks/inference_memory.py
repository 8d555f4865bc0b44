"""Peak memory of one inference job on a paper-sized subset (3,000 COCO-sized images).

    .venv/bin/python benchmarks/inference_memory.py [WORKDIR]

Generates a VQAv2 miniature of 3,000 JPEG images (640x480, 480x640, 500x375) with
about 16,000 questions, prepares it with the vqav2 adapter, then runs a tiny random BLIP
(the test suite's) over the clean subset in a fresh process, once with the default
chunking and once with the whole subset as one chunk, and prints each job's peak RSS.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

JOB = """
import resource, sys, time
from vqarobust.inference import Subset, run_inference
from vqarobust.models import ModelRef
t = time.perf_counter()
spec = {{"family": "blip", "path_or_id": {model!r}, "device": "cpu"}}
n = run_inference(ModelRef("tiny-blip", spec, options={{"batch_size": 64}}),
                  {questions!r}, [Subset("clean", 0, {images!r})], {out!r}, device="cpu",
                  chunk_size={chunk})
print(n, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main(workdir: str | None = None) -> None:
    from tests.tiny_checkpoints import tiny_blip
    from vqarobust.datasets import PreparedOutputs, prepare_dataset
    from vqarobust.datasets.miniature import write_mini_vqav2

    root = Path(workdir or tempfile.mkdtemp(prefix="vqarobust-mem-"))
    t = time.perf_counter()
    mini = write_mini_vqav2(root / "vqav2", n_images=3000)
    prepared = root / "prepared"
    counts = prepare_dataset(
        "vqav2",
        PreparedOutputs(
            prepared / "questions.parquet",
            prepared / "images",
            prepared / "manifest.txt",
            prepared / "dataset.json",
        ),
        questions=str(mini["questions"]),
        annotations=str(mini["annotations"]),
        images=str(mini["images"]),
        n_images=3000,
    )
    shard_mb = sum(p.stat().st_size for p in (prepared / "images").iterdir()) / 2**20
    print(
        f"prepared {counts['images']} images, {counts['questions']} questions "
        f"({shard_mb:.0f} MB of JPEG shards) in {time.perf_counter() - t:.0f}s"
    )
    model = tiny_blip(root / "tiny-blip")
    for chunk in (1024, counts["questions"]):
        code = JOB.format(
            model=str(model),
            questions=str(prepared / "questions.parquet"),
            images=str(prepared / "images"),
            out=str(root / f"pred-{chunk}.parquet"),
            chunk=chunk,
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
        )
        n, seconds, rss_kb = out.stdout.split()
        label = "default" if chunk == 1024 else "whole subset"
        print(
            f"chunk_size {chunk:>6} ({label}): {n} predictions in {float(seconds):.0f}s, "
            f"peak RSS {int(rss_kb) / 1024:.0f} MB"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])

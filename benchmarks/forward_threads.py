"""How a second core could speed up the shipped vilt-tiny's forward on this machine: one
batch of ``--batch-size`` questions (``--text`` text positions and the checkpoint's 17
image positions, random token ids and patch embeddings: the time does not depend on the
values) answered ``--batches`` times

- one after the other on one torch thread,
- one after the other on two torch threads (intra-op: what ``threads.infer: 2`` does),
- as two Python threads of half the batches each, one torch thread each (inter-op: not
  built in the workflow),

and, for scale, the GFLOPS of a matrix product of the forward's largest shape on one and
two torch threads. The three ways' logits are checked equal. Prints a Markdown table;
docs/performance.md ("The suite and the main job on the AMD EPYC with AVX-512") quotes it:

    .venv/bin/python benchmarks/forward_threads.py [--batches 20] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import torch
from transformers import AutoModelForVisualQuestionAnswering

CHECKPOINT = Path(__file__).resolve().parent.parent / "checkpoints" / "easy-vqa" / "vilt-tiny"
IMAGE_POSITIONS = 17  # 16 patches of a 64x64 image at patch size 16, and the image's [CLS]


def batch(model: torch.nn.Module, size: int, text: int) -> dict[str, torch.Tensor]:
    """A seeded batch of the forward's inputs: token ids, patch embeddings, full masks."""
    gen = torch.Generator().manual_seed(0)
    config = model.config
    return {
        "input_ids": torch.randint(0, config.vocab_size, (size, text), generator=gen),
        "attention_mask": torch.ones(size, text, dtype=torch.long),
        "image_embeds": torch.randn(size, IMAGE_POSITIONS, config.hidden_size, generator=gen),
        "pixel_mask": torch.ones(size, IMAGE_POSITIONS, dtype=torch.long),
    }


def forwards(model: torch.nn.Module, inputs: dict, n: int) -> torch.Tensor:
    """``n`` forwards of the batch; the last one's logits."""
    with torch.inference_mode():
        for _ in range(n):
            logits = model(**inputs).logits
    return logits


def timed(fn) -> tuple[float, float, object]:
    """Wall and process CPU seconds of ``fn()``, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def two_python_threads(model: torch.nn.Module, inputs: dict, n: int) -> torch.Tensor:
    """Half the batches on each of two Python threads (torch's own threads: one)."""
    results: list[torch.Tensor] = []
    workers = [
        threading.Thread(target=lambda k=k: results.append(forwards(model, inputs, k)))
        for k in (n // 2, n - n // 2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results[0]


def gflops(rows: int, inner: int, cols: int, threads: int, repeats: int = 100) -> float:
    """GFLOPS of a (rows x inner) by (inner x cols) product on ``threads`` torch threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    a @ b
    wall = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return repeats * 2 * rows * inner * cols / (time.perf_counter() - wall) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--text", type=int, default=12, help="text positions per question")
    args = parser.parse_args()
    if args.batches < 2:
        parser.error("--batches must be at least 2: the two Python threads take half each")
    model = AutoModelForVisualQuestionAnswering.from_pretrained(CHECKPOINT).eval()
    inputs = batch(model, args.batch_size, args.text)
    ways = {
        "one after the other, 1 torch thread": (1, forwards),
        "one after the other, 2 torch threads": (2, forwards),
        "2 Python threads, 1 torch thread each": (1, two_python_threads),
    }
    rows, reference = [], None
    for name, (threads, run) in ways.items():
        torch.set_num_threads(threads)
        forwards(model, inputs, 1)  # warm-up
        wall, cpu, logits = timed(lambda r=run: r(model, inputs, args.batches))
        if reference is None:
            reference = logits
        elif not torch.equal(logits, reference):
            raise SystemExit(f"{name}: the logits differ from one thread's")
        rows.append((name, wall, cpu))
    print(
        f"vilt-tiny, {args.batches} batches of {args.batch_size} questions "
        f"({args.text} text and {IMAGE_POSITIONS} image positions)\n"
    )
    print("| way | wall s | CPU s | ms a batch | speed-up |\n|---|---|---|---|---|")
    for name, wall, cpu in rows:
        ms = 1000 * wall / args.batches
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {ms:.0f} | {rows[0][1] / wall:.2f} |")
    shape = (args.batch_size * (args.text + IMAGE_POSITIONS), model.config.hidden_size)
    shape += (model.config.intermediate_size,)
    one, two = gflops(*shape, threads=1), gflops(*shape, threads=2)
    print(f"\n{shape[0]} x {shape[1]} by {shape[1]} x {shape[2]}: {one:.0f} GFLOPS on one")
    print(f"torch thread, {two:.0f} on two")


if __name__ == "__main__":
    main()

"""Cost of the attention-shift diagnostic on tiny models: seconds per request of
``image_attention`` against ``answer_all`` on the same images and questions, for a tiny
random-init ViLT, BLIP and LLaVA (the test suite's builders), and what that makes of one
``image_attention`` job next to the inference of a run.

    .venv/bin/python benchmarks/attention_overhead.py --requests 64 --subsets 71 \
        --questions 1902 --n 50

Prints a table (docs/metrics.md, "Attention shift").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.tiny_checkpoints import random_images, tiny_blip, tiny_llava  # noqa: E402
from vqarobust.models import load_model  # noqa: E402


def tiny_vilt(path: Path) -> Path:
    """A random-init ViLT (one layer, 32 wide, 16-pixel patches) with MiniLM's BERT
    tokenizer, saved as a checkpoint folder."""
    from transformers import AutoTokenizer, ViltConfig, ViltForQuestionAnswering, ViltProcessor
    from transformers.models.vilt import ViltImageProcessorPil as ViltImageProcessor

    from vqarobust.text.encoder import default_model_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    config = ViltConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        patch_size=16,
        image_size=64,
        max_position_embeddings=40,
        id2label={i: f"a{i}" for i in range(10)},
    )
    ViltForQuestionAnswering(config).save_pretrained(path)
    image = ViltImageProcessor(size={"shortest_edge": 64}, size_divisor=16)
    ViltProcessor(image_processor=image, tokenizer=tokenizer).save_pretrained(path)
    return path


def _seconds(fn, *args) -> float:
    fn(*args)  # warm up
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--subsets", type=int, default=71, help="corrupted subsets + clean")
    parser.add_argument("--questions", type=int, default=1902, help="questions per subset")
    parser.add_argument("--n", type=int, default=50, help="diagnostics.attention.n")
    args = parser.parse_args()
    torch.set_num_threads(1)
    images = random_images(args.requests, (64, 64))
    questions = [f"what color is the shape number {i}?" for i in range(args.requests)]
    asked = args.n + 3  # the sample questions too
    print(
        f"{args.requests} requests, 1 thread; a job: {asked} questions x {args.subsets} "
        f"subsets of attention against {args.questions} x {args.subsets} answers"
    )
    print("| model | answer (ms/request) | attention (ms/request) | ratio | job overhead |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, family, path in (
            ("ViLT", "vqa-classifier", tiny_vilt(root / "vilt")),
            ("BLIP", "blip", tiny_blip(root / "blip")),
            ("LLaVA", "llava", tiny_llava(root / "llava")),
        ):
            model = load_model(
                {"family": family, "path_or_id": str(path), "device": "cpu", "batch_size": 16}
            )
            answer = _seconds(model.answer_all, images, questions) / args.requests

            def attention(model=model) -> None:
                for start in range(0, args.requests, model.batch_size):
                    batch = slice(start, start + model.batch_size)
                    model.image_attention(images[batch], questions[batch])

            att = _seconds(attention) / args.requests
            overhead = (asked * att) / (args.questions * answer)
            print(
                f"| {name} | {answer * 1e3:.2f} | {att * 1e3:.2f} | {att / answer:.2f} | "
                f"{overhead:.1%} |"
            )


if __name__ == "__main__":
    main()

"""The adapters' batched inference against the usual one-request-at-a-time loop.

General evaluation harnesses run most Hugging Face VQA models one request at a time: the
processor on one (image, question), the model's forward (or ``generate``), the answer
decoded. This script runs the same questions through one model both ways, checks that
every answer is the same, and prints the time of each and their ratio:

- ``vqa-classifier``: the shipped reference ViLT (``checkpoints/easy-vqa/vilt-tiny``) and
  CNN+BoW on the first N questions of the default study's images (easy-VQA's test split,
  the default's seeded 200-image subset). The usual loop is ``processor(images=...,
  text=...)`` then ``model(**inputs).logits.argmax(-1)``, as the ViLT model card does.
- ``blip`` (generative): a random-initialised BLIP with a ViT-Base-sized vision tower
  (12 layers, width 768, 224 pixels: the vision side of Salesforce/blip-vqa-base) and a
  1-layer text side, built here offline (the Hub is out of reach). Its answers are
  noise, but equal noise both ways; the usual loop is ``model.generate(**processor(image,
  question))`` as the BLIP model card does; fewer requests (``--generative-questions``),
  since its tower takes about a second per image on one thread.

Both ways run on one thread (``--threads``), in the same process, after one warm-up
request each. docs/models.md ("Batched inference against the usual loop") quotes the output::

    .venv/bin/python benchmarks/inference.py [--questions 400] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vqarobust.datasets import PreparedOutputs, prepare_dataset  # noqa: E402
from vqarobust.inference import decode_images  # noqa: E402
from vqarobust.models import load_model  # noqa: E402
from vqarobust.store import ImageShards, read_questions  # noqa: E402


def default_requests(tmp: Path, n: int) -> tuple[list, list[str]]:
    """The first ``n`` questions (in image order) of the default study's 200 images."""
    q_path, img_dir = tmp / "q.parquet", tmp / "images"
    outputs = PreparedOutputs(q_path, img_dir, tmp / "manifest.txt", tmp / "dataset.json")
    prepare_dataset("easy-vqa", outputs, split="test", n_images=200, seed=0)
    questions = read_questions(q_path).sort_by(
        [("image_id", "ascending"), ("question_id", "ascending")]
    )
    questions = questions.slice(0, n)
    ids = questions.column("image_id").to_pylist()
    images = decode_images(ImageShards(str(img_dir)), sorted(set(ids)))
    return [images[i] for i in ids], questions.column("question").to_pylist()


def timed(run: Callable[[], list[str]]) -> tuple[list[str], float]:
    """``run()``'s answers and its wall time."""
    t0 = time.perf_counter()
    answers = run()
    return answers, time.perf_counter() - t0


def compare(name: str, entry: dict, images: Sequence, questions: Sequence[str]) -> bool:
    """Time both ways on the same requests; print the row; whether every answer agrees."""
    from tests.usual_loops import one_at_a_time

    model = load_model(entry, name)
    model.answer_all(images[:1], questions[:1])
    path = entry["path_or_id"]
    one_at_a_time(entry["family"], path, images[:1], questions[:1])
    batched, t_batched = timed(lambda: model.answer_all(images, questions))
    single, t_single = timed(lambda: one_at_a_time(entry["family"], path, images, questions))
    differ = sum(a != b for a, b in zip(batched, single, strict=True))
    n = len(questions)
    print(
        f"| {name} | {n} | {t_single:.2f} s ({n / t_single:.0f} q/s) | "
        f"{t_batched:.2f} s ({n / t_batched:.0f} q/s) | {t_single / t_batched:.1f}x | "
        f"{differ} |",
        flush=True,
    )
    return differ == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=400, help="requests per model")
    parser.add_argument(
        "--generative-questions",
        type=int,
        default=64,
        help="requests for the generative model (its ViT-B tower is slow)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--checkpoints", default="checkpoints/easy-vqa")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from tests.tiny_checkpoints import tiny_blip

    with tempfile.TemporaryDirectory() as tmp:
        images, questions = default_requests(Path(tmp), args.questions)
        blip = tiny_blip(
            Path(tmp) / "blip",
            vision={
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "image_size": 224,
                "patch_size": 16,
            },
        )
        print(
            f"torch {torch.__version__}, {args.threads} thread(s), {len(questions)} "
            f"questions about {len({id(i) for i in images})} images\n"
        )
        print("| model | requests | one at a time | answer_all | ratio | answers differing |")
        print("|---|---|---|---|---|---|")
        agree = []
        for m in ("vilt-tiny", "cnn-bow"):
            entry = {
                "family": "vqa-classifier",
                "path_or_id": f"{args.checkpoints}/{m}",
                "batch_size": 256,
            }
            agree.append(compare(m, entry, images, questions))
        # BLIP at a batch size that fits its generation on a small machine.
        blip_entry = {"family": "blip", "path_or_id": str(blip), "batch_size": 32}
        k = args.generative_questions
        agree.append(compare("blip (random, ViT-B vision)", blip_entry, images[:k], questions[:k]))
    if not all(agree):
        print("answers differ between the two ways", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

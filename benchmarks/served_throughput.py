"""Requests per second of the openai-chat client against a simulated inference server
(tests/chat_server.py's CostServer: GPU slots, a per-request cost, a prefix-cache
discount for an image computed recently, 429s beyond its queue), at a fixed concurrency
of 1 and 8 and with the adaptive limit, each with and without image ordering: the
numbers docs/models.md quotes ("Served models at scale").

    .venv/bin/python benchmarks/served_throughput.py [--images 48] [--questions 8]

The workload is one inference chunk as the workflow passes it: every question of an
image together, images in turn (``--questions`` per image). "By image" is the client's
order (requests about one image are sent together); "by length" is the order every
in-process adapter uses, longest question first, which scatters an image's questions
over the chunk.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chat_server import CostServer  # noqa: E402
from vqarobust.models import load_model  # noqa: E402
from vqarobust.models.base import VQAModel  # noqa: E402


def workload(n_images: int, per_image: int) -> tuple[list[Image.Image], list[str]]:
    """``per_image`` questions of different lengths about each of ``n_images`` images."""
    rng = np.random.default_rng(0)
    images, questions = [], []
    for i in range(n_images):
        image = Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8))
        for q in range(per_image):
            images.append(image)
            questions.append("what is " + "very " * int(rng.integers(0, 12)) + f"shown {i} {q}?")
    return images, questions


def run(
    base_url: str, images: list, questions: list, concurrency: int, adaptive: bool, by_image: bool
) -> tuple[float, int, float]:
    """Requests per second of one pass, the requests the client sent (retries too) and
    the mean concurrency limit over the replies."""
    client = load_model(
        {
            "family": "openai-chat",
            "base_url": base_url,
            "model": "m",
            "max_concurrency": concurrency,
            "adaptive_concurrency": adaptive,
            "max_retries": 8,
            "batch_size": len(questions),
        },
        name="bench",
    )
    if not by_image:
        client.request_order = lambda ims, qs: VQAModel.request_order(client, ims, qs)
    t = time.perf_counter()
    client.answer_all(images, questions)
    seconds = time.perf_counter() - t
    client.close()
    return len(questions) / seconds, client.requests_sent, client.limit.mean_limit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=48)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--ceiling", type=int, default=32, help="max_concurrency when adaptive")
    a = parser.parse_args()
    images, questions = workload(a.images, a.questions)
    print(
        f"{len(questions)} requests ({a.images} images x {a.questions} questions); server: "
        "8 slots, 40 ms prefill (4 ms for an image among the 4 last computed), 10 ms decode, "
        "429 beyond 16 in flight"
    )
    print(
        "| concurrency | order | requests/s | sent (with retries) | 429s | cache hits | "
        "mean limit |"
    )
    print("|---|---|---|---|---|---|---|")
    settings = (
        ("1", 1, False),
        ("8", 8, False),
        (str(a.ceiling), a.ceiling, False),
        (f"adaptive, ceiling {a.ceiling}", a.ceiling, True),
    )
    for label, concurrency, adaptive in settings:
        for by_image in (True, False):
            with CostServer() as server:
                rate, sent, limit = run(
                    server.base_url, images, questions, concurrency, adaptive, by_image
                )
            order = "by image" if by_image else "by length"
            print(
                f"| {label} | {order} | {rate:.1f} | {sent} | {server.refused} | "
                f"{server.hits} | {limit:.1f} |"
            )


if __name__ == "__main__":
    main()

"""How long the openai-chat client takes to give up on a server that is down (a closed
port on 127.0.0.1), with the default retries: the number docs/models.md quotes.

    .venv/bin/python benchmarks/served_retries.py --runs 20
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time

from PIL import Image

from vqarobust.models import load_model
from vqarobust.models.served import ServerError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    image = Image.new("RGB", (8, 8))
    seconds = []
    for run in range(args.runs):
        # A new name per run: the jitter is seeded per model name and seed.
        client = load_model(
            {
                "family": "openai-chat",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "model": "m",
                "seed": run,
            },
            name=f"down-{run}",
        )
        t = time.perf_counter()
        try:
            client.answer([image], ["q?"])
        except ServerError:
            seconds.append(time.perf_counter() - t)
        client.close()
    mean, low, high = statistics.mean(seconds), min(seconds), max(seconds)
    print(
        f"server down, default max_retries 3, {args.runs} runs: mean {mean:.2f} s, "
        f"min {low:.2f} s, max {high:.2f} s (bound 0.5+1+2 = 3.5 s)"
    )


if __name__ == "__main__":
    main()

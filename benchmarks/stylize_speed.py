"""Seconds per 640x480 image for stylize (AdaIN) at the public network's full widths.

    .venv/bin/python benchmarks/stylize_speed.py [n_images] [threads]

Random weights in the public layout at the real channel widths (64/128/256/512): the
same arithmetic as the real AdaIN weights, which this machine cannot download. Runs on
the CPU with the given torch threads (default 1, as a corrupt_images job), style
features cached after the first image, as in a job.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tiny_checkpoints import style_images, tiny_adain  # noqa: E402
from vqarobust.corruptions.samples import photo_like  # noqa: E402
from vqarobust.corruptions.stylize import Stylizer  # noqa: E402


def main(n_images: int = 5, threads: int = 1) -> None:
    torch.set_num_threads(int(threads))
    with tempfile.TemporaryDirectory() as tmp:
        weights = tiny_adain(Path(tmp) / "w", widths=(64, 128, 256, 512))
        stylizer = Stylizer(weights, style_images(Path(tmp) / "s", n=1), device="cpu")
        rng = np.random.default_rng(0)
        stylizer(photo_like(480, 640), 5, rng)  # style features computed once
        times = []
        for k in range(int(n_images)):
            image = photo_like(480, 640, seed=k)
            t = time.perf_counter()
            stylizer(image, 5, rng)
            times.append(time.perf_counter() - t)
    print(
        f"stylize, 640x480, CPU, {threads} thread(s): {np.mean(times):.2f} s per image "
        f"(min {min(times):.2f}, max {max(times):.2f}, {n_images} images)"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))

"""Time per image of every corruption: the reference package vs vqarobust's engine.

    .venv/bin/python benchmarks/corruptions.py [n_images] [height] [width]

Runs `imagecorruptions.corrupt` (the maintained `imagecorruptions-imaug` fork installed
with the project) and `vqarobust.corruptions.corrupt` on the same synthetic photo-like
images (default 3 images of 640x480), severities 1..5, one thread, and prints seconds per
image (all 5 severities) for both and the ratio. While the engine still delegates to the
reference (issue 4 replaces it with native code), the ratio measures the wrapper's
overhead (per-image seeding, validation).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from vqarobust import corruptions  # noqa: E402


def photo_like(h: int, w: int, seed: int) -> np.ndarray:
    """Smooth gradients, a few rectangles and sensor noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (h + w)], axis=-1)
    for _ in range(6):
        y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
        img[y0 : y0 + h // 4, x0 : x0 + w // 4] = rng.integers(0, 256, 3)
    return np.clip(img + rng.normal(0, 4, img.shape), 0, 255).astype(np.uint8)


def main(n_images: int = 3, height: int = 480, width: int = 640) -> None:
    from imagecorruptions import corrupt as reference

    images = [photo_like(int(height), int(width), s) for s in range(int(n_images))]
    total_ref = total_new = 0.0
    print(f"{'corruption':20s} {'reference s/img':>16s} {'vqarobust s/img':>16s} {'ratio':>7s}")
    for name in corruptions.names(benchmark=True) + ["glass_blur"]:
        t_ref = t_new = 0.0
        for k, img in enumerate(images):
            for s in range(1, 6):
                t0 = time.perf_counter()
                np.random.seed(k)  # noqa: NPY002  (the reference reads global state)
                reference(img, corruption_name=name, severity=s)
                t1 = time.perf_counter()
                corruptions.corrupt(img, name, s, seed=k)
                t2 = time.perf_counter()
                t_ref += t1 - t0
                t_new += t2 - t1
        t_ref /= len(images)
        t_new /= len(images)
        if name != "glass_blur":
            total_ref += t_ref
            total_new += t_new
        print(f"{name:20s} {t_ref:16.3f} {t_new:16.3f} {t_ref / t_new:7.2f}")
    print(f"{'14 benchmark total':20s} {total_ref:16.3f} {total_new:16.3f} "
          f"{total_ref / total_new:7.2f}")  # fmt: skip


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Time per image of every corruption: the reference package vs vqarobust's engine.

    .venv/bin/python benchmarks/corruptions.py [n_images] [height] [width]

Runs the reference (`imagecorruptions`, the maintained `imagecorruptions-imaug` fork
installed with the project, seeded like the engine: `vqarobust.corruptions.reference`)
and `vqarobust.corruptions.corrupt` on the same synthetic photo-like images (default 3
images of 640x480, COCO-sized), severities 1..5, on one core (OpenCV, BLAS and numba
limited to one thread), and prints seconds per image (all 5 severities) for both, the
ratio, and the largest mean absolute difference between the two outputs (grey levels).
Both sides are warmed up first (numba compiles glass blur on first use: its compile time
is printed separately). The last line times imagecorruptions 1.1.2's glass blur, a
pure-Python loop (the fork's numba function run uncompiled, ``.py_func``), on one image.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from vqarobust import corruptions  # noqa: E402
from vqarobust.corruptions.reference import reference_corrupt  # noqa: E402
from vqarobust.corruptions.samples import photo_like  # noqa: E402

cv2.setNumThreads(1)


def _first_call(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main(n_images: int = 3, height: int = 480, width: int = 640) -> None:
    images = [photo_like(int(height), int(width), s) for s in range(int(n_images))]
    small = images[0][:64, :64]
    print(
        f"first call (incl. numba compile) of glass_blur on 64x64: reference "
        f"{_first_call(reference_corrupt, small, 'glass_blur', 1):.2f} s, vqarobust "
        f"{_first_call(corruptions.corrupt, small, 'glass_blur', 1):.2f} s"
    )
    total_ref = total_new = 0.0
    print(
        f"{'corruption':20s} {'reference s/img':>16s} {'vqarobust s/img':>16s} {'ratio':>7s} "
        f"{'max mean |diff|':>16s}"
    )
    for name in corruptions.names(benchmark=True) + ["glass_blur"]:
        # Each side runs its block of calls in turn, as a corruption job would; alternating
        # them makes each pay page faults for memory the other just returned to the OS.
        jobs = [(k, img, s) for k, img in enumerate(images) for s in range(1, 6)]
        t0 = time.perf_counter()
        ref = [reference_corrupt(img, name, s, seed=k) for k, img, s in jobs]
        t1 = time.perf_counter()
        new = [corruptions.corrupt(img, name, s, seed=k) for k, img, s in jobs]
        t2 = time.perf_counter()
        t_ref, t_new = t1 - t0, t2 - t1
        diffs = [np.abs(a.astype(float) - b).mean() for a, b in zip(ref, new, strict=True)]
        worst = float(max(diffs))
        t_ref /= len(images)
        t_new /= len(images)
        if name != "glass_blur":
            total_ref += t_ref
            total_new += t_new
        print(f"{name:20s} {t_ref:16.3f} {t_new:16.3f} {t_ref / t_new:7.1f} {worst:16.3f}")
    print(
        f"{'14 benchmark total':20s} {total_ref:16.3f} {total_new:16.3f} "
        f"{total_ref / total_new:7.1f}"
    )
    seconds = _python_glass_blur(images[0])
    print(f"glass_blur of imagecorruptions 1.1.2 (pure Python): {seconds:.1f} s per image")


def _python_glass_blur(image: np.ndarray) -> float:
    """Seconds for all five severities with the scrambling loop run as plain Python."""
    from imagecorruptions import corruptions as ref
    from PIL import Image

    compiled = ref._shuffle_pixels_njit_glass_blur
    ref._shuffle_pixels_njit_glass_blur = compiled.py_func
    state = np.random.get_state()  # noqa: NPY002  (the loop seeds the global state)
    try:
        t0 = time.perf_counter()
        for s in range(1, 6):
            ref.glass_blur(Image.fromarray(image), s, seed=s)
        return time.perf_counter() - t0
    finally:
        ref._shuffle_pixels_njit_glass_blur = compiled
        np.random.set_state(state)  # noqa: NPY002


if __name__ == "__main__":
    main(*sys.argv[1:])

"""SSIM and PSNR of a corrupted image against its clean image, computed where the images
are corrupted (docs/metrics.md, "Image quality").

SSIM is scikit-image's ``structural_similarity`` with its defaults (a 7x7 uniform window,
sample covariance, K1 = 0.01, K2 = 0.03, ``data_range`` 255, the mean over the channels of
each channel's mean over the image without a 3-pixel border), re-implemented on OpenCV's
box filter in float32: importing scikit-image's metrics costs about a second in each of
the run's ~70 corruption jobs, and its float64 filters took longer than the corruption of
a small image. The border that the mean leaves out is exactly what the filter's edge
handling touches, so the result does not depend on it; tests/test_image_quality.py checks
it against scikit-image (to 1e-7).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

DATA_RANGE = 255.0
WINDOW = 7
PAD = (WINDOW - 1) // 2  # the border the mean leaves out
K1, K2 = 0.01, 0.03


def at_size(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` scaled to height x width (bicubic, ``cv2.INTER_CUBIC``) where it has
    another size. The quality scores (SSIM, PSNR, LPIPS) compare a resizing corruption's
    small image with its clean one there, so ``low_resolution``'s scores are those of
    ``downscale_bicubic`` at the same severity: the detail lost, not the size."""
    if image.shape[:2] == (height, width):
        return image
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_CUBIC)


def ssim_psnr(clean: np.ndarray, corrupted: np.ndarray) -> tuple[float, float]:
    """SSIM and PSNR in dB of two HxWx3 uint8 images of one size; PSNR is +inf for
    identical images (and SSIM then exactly 1)."""
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean image {clean.shape} and corrupted {corrupted.shape} differ")
    if clean.ndim != 3 or min(clean.shape[:2]) < WINDOW:
        raise ValueError(f"SSIM needs HxWx3 images of at least {WINDOW}x{WINDOW}, "
                         f"got {clean.shape}")  # fmt: skip
    x = clean.astype(np.float32)
    y = corrupted.astype(np.float32)

    def mean(a: np.ndarray) -> np.ndarray:
        return cv2.blur(a, (WINDOW, WINDOW), borderType=cv2.BORDER_REFLECT)

    # Whole (contiguous) arrays throughout, cropped once at the end: faster than views.
    ux, uy = mean(x), mean(y)
    uxuy, ux2, uy2 = ux * uy, ux * ux, uy * uy
    cov = np.float32(WINDOW**2 / (WINDOW**2 - 1))  # sample covariance over the window
    c1, c2 = np.float32((K1 * DATA_RANGE) ** 2), np.float32((K2 * DATA_RANGE) ** 2)
    num = (2 * uxuy + c1) * (cov * 2 * (mean(x * y) - uxuy) + c2)
    # (vx + vy) grouped so that identical images give num == den bit for bit (SSIM 1).
    den = (ux2 + uy2 + c1) * (cov * ((mean(x * x) - ux2) + (mean(y * y) - uy2)) + c2)
    s = (num / den)[PAD:-PAD, PAD:-PAD]
    # The mean over each channel's interior, then over the channels (of equal size).
    ssim = float(s.mean(dtype=np.float64))
    d = x - y
    mse = float(np.mean(d * d, dtype=np.float64))
    return ssim, math.inf if mse == 0 else 10 * math.log10(DATA_RANGE**2 / mse)

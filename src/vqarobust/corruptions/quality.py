"""SSIM and PSNR of a corrupted image against its clean image, computed where the images
are corrupted (docs/metrics.md, "Image quality").

SSIM is scikit-image's ``structural_similarity`` with its defaults (a 7x7 uniform window,
sample covariance, K1 = 0.01, K2 = 0.03, ``data_range`` 255, the mean over the channels of
each channel's mean over the image without a 3-pixel border), re-implemented on OpenCV's
box filter: importing scikit-image's metrics costs about a second, several times the
scores of a whole subset, in each of the run's ~70 corruption jobs. The border that the
mean leaves out is exactly what the filter's edge handling touches, so the result does not
depend on it; tests/test_image_quality.py checks it against scikit-image.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

DATA_RANGE = 255.0
WINDOW = 7
K1, K2 = 0.01, 0.03


def ssim_psnr(clean: np.ndarray, corrupted: np.ndarray) -> tuple[float, float]:
    """SSIM and PSNR in dB of two HxWx3 uint8 images of one size; PSNR is +inf for
    identical images."""
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean image {clean.shape} and corrupted {corrupted.shape} differ")
    if min(clean.shape[:2]) < WINDOW:
        raise ValueError(f"SSIM needs images of at least {WINDOW}x{WINDOW}, got {clean.shape}")
    x = clean.astype(np.float64)
    y = corrupted.astype(np.float64)

    def mean(a: np.ndarray) -> np.ndarray:
        return cv2.blur(a, (WINDOW, WINDOW), borderType=cv2.BORDER_REFLECT)

    ux, uy = mean(x), mean(y)
    cov = WINDOW**2 / (WINDOW**2 - 1)  # sample covariance over the window
    vx = cov * (mean(x * x) - ux * ux)
    vy = cov * (mean(y * y) - uy * uy)
    vxy = cov * (mean(x * y) - ux * uy)
    c1, c2 = (K1 * DATA_RANGE) ** 2, (K2 * DATA_RANGE) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux**2 + uy**2 + c1) * (vx + vy + c2))
    pad = (WINDOW - 1) // 2
    ssim = float(s[pad:-pad, pad:-pad].reshape(-1, s.shape[-1]).mean(axis=0).mean())
    mse = float(np.mean((x - y) ** 2))
    psnr = math.inf if mse == 0 else 10 * math.log10(DATA_RANGE**2 / mse)
    return ssim, psnr

"""SSIM and PSNR of a corrupted image against its clean image, computed where the images
are corrupted (docs/metrics.md, "Image quality").

SSIM is Wang et al. 2004's by default (``window="gaussian"``: an 11x11 Gaussian window of
sigma 1.5, population covariance; scikit-image's ``structural_similarity(...,
gaussian_weights=True, sigma=1.5, use_sample_covariance=False)``), the one the multimodal
paper's Table 9 cites; ``window="uniform"`` is scikit-image's default (a 7x7 uniform
window, sample covariance). Both with K1 = 0.01, K2 = 0.03, ``data_range`` 255, the mean
over the channels of each channel's mean over the image without the window's half-width
border. Re-implemented on OpenCV's filters in float32: importing scikit-image's metrics
costs about a second in each of the run's ~70 corruption jobs, and its float64 filters
took longer than the corruption of a small image. The border that the mean leaves out is
exactly what the filter's edge handling touches, so the result does not depend on it;
tests/test_image_quality.py checks both against scikit-image (to 1e-6) and the Gaussian
one against Wang et al.'s formula summed window by window in numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

DATA_RANGE = 255.0
K1, K2 = 0.01, 0.03
SIGMA = 1.5  # Wang et al.'s Gaussian window


@dataclass(frozen=True)
class Window:
    """An SSIM window: its side, and whether the covariances are the sample's."""

    size: int
    sample_covariance: bool

    @property
    def pad(self) -> int:
        """The border the mean leaves out (the window's half-width)."""
        return (self.size - 1) // 2


# gaussian: scikit-image's 11 taps for sigma 1.5 (radius int(3.5 sigma + 0.5) = 5).
WINDOWS = {"gaussian": Window(11, False), "uniform": Window(7, True)}
DEFAULT_WINDOW = "gaussian"


def at_size(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """``image`` scaled to height x width (bicubic, ``cv2.INTER_CUBIC``) where it has
    another size. The quality scores (SSIM, PSNR, LPIPS) compare a resizing corruption's
    small image with its clean one there, so ``low_resolution``'s scores are those of
    ``downscale_bicubic`` at the same severity: the detail lost, not the size."""
    if image.shape[:2] == (height, width):
        return image
    return cv2.resize(image, (width, height), interpolation=cv2.INTER_CUBIC)


def ssim_psnr(
    clean: np.ndarray, corrupted: np.ndarray, window: str = DEFAULT_WINDOW
) -> tuple[float, float]:
    """SSIM (with ``window``, a key of :data:`WINDOWS`) and PSNR in dB of two HxWx3 uint8
    images of one size; PSNR is +inf for identical images (and SSIM then exactly 1)."""
    if window not in WINDOWS:
        raise ValueError(f"SSIM window must be one of {sorted(WINDOWS)}, got {window!r}")
    w = WINDOWS[window]
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean image {clean.shape} and corrupted {corrupted.shape} differ")
    if clean.ndim != 3 or min(clean.shape[:2]) < w.size:
        raise ValueError(
            f"SSIM ({window} window) needs HxWx3 images of at least "
            f"{w.size}x{w.size}, got {clean.shape}"
        )
    x = clean.astype(np.float32)
    y = corrupted.astype(np.float32)

    def mean(a: np.ndarray) -> np.ndarray:
        if window == "gaussian":
            return cv2.GaussianBlur(a, (w.size, w.size), SIGMA, borderType=cv2.BORDER_REFLECT)
        return cv2.blur(a, (w.size, w.size), borderType=cv2.BORDER_REFLECT)

    # Whole (contiguous) arrays throughout, cropped once at the end: faster than views.
    ux, uy = mean(x), mean(y)
    uxuy, ux2, uy2 = ux * uy, ux * ux, uy * uy
    # The sample covariance over the window's n pixels, or the population's (Wang et al.).
    cov = np.float32(w.size**2 / (w.size**2 - 1) if w.sample_covariance else 1.0)
    c1, c2 = np.float32((K1 * DATA_RANGE) ** 2), np.float32((K2 * DATA_RANGE) ** 2)
    num = (2 * uxuy + c1) * (cov * 2 * (mean(x * y) - uxuy) + c2)
    # (vx + vy) grouped so that identical images give num == den bit for bit (SSIM 1).
    den = (ux2 + uy2 + c1) * (cov * ((mean(x * x) - ux2) + (mean(y * y) - uy2)) + c2)
    s = (num / den)[w.pad : -w.pad, w.pad : -w.pad]
    # The mean over each channel's interior, then over the channels (of equal size).
    ssim = float(s.mean(dtype=np.float64))
    d = x - y
    mse = float(np.mean(d * d, dtype=np.float64))
    return ssim, math.inf if mse == 0 else 10 * math.log10(DATA_RANGE**2 / mse)

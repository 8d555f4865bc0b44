"""Physical corruptions: elastic deformation and spatter (water drops or mud)."""

from __future__ import annotations

import cv2
import numpy as np

from vqarobust.corruptions.filters import gaussian_filter, to_uint8
from vqarobust.corruptions.randomness import legacy_stream
from vqarobust.corruptions.registry import CORRUPTIONS

_WATER = np.array([175, 238, 238], np.float32) / 255  # pale turquoise
_MUD = np.array([63, 42, 20], np.float32) / 255  # brown


@CORRUPTIONS.register(family="physical", benchmark=True)
def elastic_transform(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Resampling along a smooth random displacement field (Gaussian-filtered uniform noise
    of width 1% of the image, scaled by ``alpha``), bilinear with mirrored borders."""
    alpha = (250 * 0.05, 250 * 0.065, 250 * 0.085, 250 * 0.1, 250 * 0.12)[severity - 1]
    h, w = image.shape[:2]
    sigma = (h * 0.01, w * 0.01)
    max_shift = h * 0.005  # of both components, as in the reference
    stream = legacy_stream(rng)
    shifts = []
    for _ in range(2):  # x then y displacement
        # float32 filtering: the reference rounds the field to float32 anyway.
        noise = stream.uniform(-max_shift, max_shift, size=(h, w)).astype(np.float32)
        shifts.append(gaussian_filter(noise, sigma, mode="reflect", truncate=3) * alpha)
    grid_y, grid_x = np.indices((h, w), dtype=np.float32)
    x = image.astype(np.float32) / 255
    out = cv2.remap(
        x,
        grid_x + shifts[0],
        grid_y + shifts[1],
        interpolation=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REFLECT,
    )
    return to_uint8(out)


@CORRUPTIONS.register(family="physical", benchmark=True)
def spatter(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Blobs of thresholded, blurred Gaussian noise: water drops with shaded rims
    (severities 1-3) or opaque mud (4-5)."""
    # noise mean, noise sd, blur sigma, threshold, drop intensity / mud sigma, is mud
    mean, sd, blur, threshold, strength, mud = (
        (0.65, 0.3, 4, 0.69, 0.6, 0),
        (0.65, 0.3, 3, 0.68, 0.6, 0),
        (0.65, 0.3, 2, 0.68, 0.5, 0),
        (0.65, 0.3, 1, 0.65, 1.5, 1),
        (0.67, 0.4, 1, 0.65, 1.5, 1),
    )[severity - 1]
    h, w = image.shape[:2]
    x = image.astype(np.float32) / 255
    noise = legacy_stream(rng).standard_normal(size=(h, w)) * sd + mean  # = normal(mean, sd)
    liquid = gaussian_filter(noise, blur)
    liquid[liquid < threshold] = 0
    if mud:
        mask = gaussian_filter((liquid > threshold).astype(np.float32), strength)
        mask[mask < 0.8] = 0
        return to_uint8(x * (1 - mask[..., None]) + _MUD * mask[..., None])
    return to_uint8(x + water_layer(liquid, strength)[..., None] * _WATER)


def water_layer(liquid: np.ndarray, strength: float) -> np.ndarray:
    """Per-pixel water of spatter's drops: the thresholded layer times its rim shading,
    scaled so the strongest pixel is ``strength``.

    The reference divides by the peak unguarded (NaN output when no drop survives the
    threshold); here no drop means no water.
    """
    drops = (liquid * 255).astype(np.uint8)
    m = drops * _drop_shading(drops)
    peak = m.max()
    return m / peak * strength if peak > 0 else np.zeros_like(m)


def _drop_shading(drops: np.ndarray) -> np.ndarray:
    """ImageNet-C's rim shading of the drops: an embossed, equalized distance to their edges."""
    dist = cv2.distanceTransform(255 - cv2.Canny(drops, 50, 150), cv2.DIST_L2, 5)
    _, dist = cv2.threshold(dist, 20, 20, cv2.THRESH_TRUNC)
    dist = cv2.equalizeHist(cv2.blur(dist, (3, 3)).astype(np.uint8))
    emboss = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], np.float32)
    dist = cv2.filter2D(dist, cv2.CV_8U, emboss)
    return cv2.blur(dist, (3, 3)).astype(np.float32)

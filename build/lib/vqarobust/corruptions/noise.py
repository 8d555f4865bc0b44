"""Noise corruptions: gaussian, shot (Poisson), impulse (salt and pepper), speckle."""

from __future__ import annotations

import numpy as np

from vqarobust.corruptions.filters import to_uint8
from vqarobust.corruptions.randomness import legacy_stream, stream_seed
from vqarobust.corruptions.registry import CORRUPTIONS


@CORRUPTIONS.register(family="noise", benchmark=True)
def gaussian_noise(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Additive N(0, sd^2) noise on [0, 1] intensities."""
    sd = (0.08, 0.12, 0.18, 0.26, 0.38)[severity - 1]
    # On the 0..255 scale in float32: x + n and image + 255 n differ by far less than the
    # spacing of the continuous noise, so truncation agrees with the reference.
    # normal(scale=sd) is sd * standard_normal(); the latter skips a slow per-element loc/scale.
    out = legacy_stream(rng).standard_normal(size=image.shape).astype(np.float32)
    out *= np.float32(sd * 255)
    out += image
    return to_uint8(out, 1.0)


@CORRUPTIONS.register(family="noise", benchmark=True)
def shot_noise(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Photon noise: Poisson(photons * x) / photons."""
    photons = (60, 25, 12, 5, 3)[severity - 1]
    counts = legacy_stream(rng).poisson(image / 255.0 * photons)
    # Exactly the reference's float64 steps: counts / photons * 255 is often an integer,
    # where truncation is sensitive to the last bit.
    return to_uint8(counts / photons)


@CORRUPTIONS.register(family="noise", benchmark=True)
def impulse_noise(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Salt and pepper: a fraction ``amount`` of channel values set to 0 or 255, evenly.

    Draws as ``skimage.util.random_noise(mode="s&p", rng=seed)`` does: uniform
    floats for "flipped", then for "salted". The reference version ignores numpy's seed
    unless given one explicitly; here the seed always comes from ``rng``.
    """
    amount = (0.03, 0.06, 0.09, 0.17, 0.27)[severity - 1]
    stream = np.random.default_rng(stream_seed(rng))
    flipped = stream.random(image.shape) <= amount
    salted = stream.random(image.shape) <= 0.5
    out = image.copy()
    out[flipped & salted] = 255
    out[flipped & ~salted] = 0
    return out


@CORRUPTIONS.register(family="noise", benchmark=True)
def speckle_noise(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Multiplicative noise: x + x * N(0, sd^2)."""
    sd = (0.15, 0.2, 0.35, 0.45, 0.6)[severity - 1]
    noise = legacy_stream(rng).standard_normal(size=image.shape).astype(np.float32)
    noise *= np.float32(sd)
    noise += 1
    return to_uint8(noise * image, 1.0)

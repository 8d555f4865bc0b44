"""Single-severity colour transforms used by the multimodal-robustness study."""

from __future__ import annotations

import numpy as np

from vqarobust.corruptions.registry import COLOUR_BIAS, CORRUPTIONS

# ITU-R BT.601 luma weights, as PIL's "L" conversion uses.
_LUMA = np.array([0.299, 0.587, 0.114])


def _gray(image: np.ndarray) -> np.ndarray:
    y = np.rint(image.astype(np.float64) @ _LUMA).clip(0, 255).astype(np.uint8)
    return np.repeat(y[..., None], 3, axis=2)


# Its labels still name the original colours, so it stays out of VRE unless asked
# (vre.include_grayscale) and the colour-bias tables read its answers instead.
@CORRUPTIONS.register(
    family="colour", benchmark=False, severities=1, outside_vre=True, diagnostic=COLOUR_BIAS
)
def grayscale(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Luma grayscale, replicated to three channels."""
    return _gray(image)


@CORRUPTIONS.register(family="colour", benchmark=False, severities=1)
def colour_inversion(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """The photographic negative of each channel."""
    return 255 - image


@CORRUPTIONS.register(family="colour", benchmark=False, severities=1)
def grayscale_inversion(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """The negative of the luma grayscale image."""
    return 255 - _gray(image)

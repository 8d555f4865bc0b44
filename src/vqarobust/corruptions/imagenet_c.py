"""The ImageNet-C family, delegating to ``imagecorruptions`` (the maintained
``imagecorruptions-imaug`` fork, which runs on numpy 2 and scikit-image 0.26).

The reference draws from numpy's global random state. Each call here seeds that state
from the caller's ``rng`` and restores it afterwards, so the output is a pure function
of (image, name, severity, rng seed); impulse noise and glass blur, which ignore the
global state, get the seed explicitly. Parameters per severity are the reference's.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator

import numpy as np
from PIL import Image

from vqarobust.corruptions.registry import CORRUPTIONS

# name -> class, in SPEC section 2's grouping. The first 14 are the benchmark's.
_FAMILY = {
    "gaussian_noise": "noise",
    "shot_noise": "noise",
    "impulse_noise": "noise",
    "speckle_noise": "noise",
    "defocus_blur": "blur",
    "zoom_blur": "blur",
    "snow": "weather",
    "brightness": "attribute",
    "contrast": "attribute",
    "saturate": "attribute",
    "elastic_transform": "physical",
    "spatter": "physical",
    "pixelate": "digital",
    "jpeg_compression": "digital",
    "glass_blur": "blur",
    "motion_blur": "blur",
    "gaussian_blur": "blur",
    "frost": "weather",
    "fog": "weather",
}
BENCHMARK = tuple(list(_FAMILY)[:14])
# Corruptions whose reference function takes an explicit seed argument.
_SEEDED = {"impulse_noise", "glass_blur"}


@contextlib.contextmanager
def _global_seed(seed: int) -> Iterator[None]:
    state = np.random.get_state()  # noqa: NPY002  (the reference reads global state)
    np.random.seed(seed)  # noqa: NPY002
    try:
        yield
    finally:
        np.random.set_state(state)  # noqa: NPY002


def _make(name: str):
    def corruption(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
        from imagecorruptions import corruptions as ref

        seed = int(rng.integers(0, 2**32 - 1))
        fn = getattr(ref, name)
        kwargs = {"seed": seed} if name in _SEEDED else {}
        with _global_seed(seed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # The reference functions expect a PIL image (as its own ``corrupt`` passes).
            out = fn(Image.fromarray(image), severity, **kwargs)
        return np.asarray(out)

    corruption.__name__ = name
    corruption.__doc__ = f"ImageNet-C {name.replace('_', ' ')} ({_FAMILY[name]}), severity 1..5."
    return corruption


for _name, _family in _FAMILY.items():
    CORRUPTIONS.register(_name, family=_family, benchmark=_name in BENCHMARK)(_make(_name))


# JPEG quality per severity, as in imagecorruptions' jpeg_compression.
JPEG_QUALITY = (25, 18, 15, 10, 7)


def jpeg_compression_bytes(image: np.ndarray, severity: int) -> bytes:
    """The JPEG file that ``jpeg_compression`` decodes: storing it keeps the corruption's
    own compressed bytes instead of re-encoding its decoded output."""
    if not 1 <= severity <= len(JPEG_QUALITY):
        raise ValueError(f"jpeg_compression severity must be 1..5, got {severity}")
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=JPEG_QUALITY[severity - 1])
    return buf.getvalue()

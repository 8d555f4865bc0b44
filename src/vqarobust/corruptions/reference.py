"""The reference implementation (``imagecorruptions``, the maintained ``-imaug`` fork),
seeded like the native engine, for faithfulness tests and the speed benchmark.

``reference_corrupt(image, name, severity, seed)`` seeds numpy's global legacy state with
the value the native corruption derives from ``seed`` (``randomness.stream_seed``), so a
faithful native corruption draws the same random numbers and returns (nearly) the same
image. Impulse noise and glass blur take the seed as an argument instead.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import numpy as np

from vqarobust.corruptions import family, names
from vqarobust.corruptions.randomness import stream_seed

# The 19 ImageNet-C corruptions the reference implements: the members of ImageNet-C's
# classes (the colour transforms, style transfer, the controls and the geometric,
# resolution and occlusion families are not ImageNet-C).
IMAGENET_C_FAMILIES = ("noise", "blur", "weather", "attribute", "physical", "digital")
REFERENCE_NAMES = tuple(n for n in names() if family(n) in IMAGENET_C_FAMILIES)
_SEED_ARGUMENT = {"impulse_noise", "glass_blur"}


@contextlib.contextmanager
def _global_seed(seed: int) -> Iterator[None]:
    state = np.random.get_state()  # noqa: NPY002  (the reference reads global state)
    np.random.seed(seed)  # noqa: NPY002
    try:
        yield
    finally:
        np.random.set_state(state)  # noqa: NPY002


def reference_corrupt(image: np.ndarray, name: str, severity: int, seed: int = 0) -> np.ndarray:
    """``imagecorruptions.corrupt`` with the random stream of ``corrupt(..., seed=seed)``."""
    from imagecorruptions import corrupt

    if name not in REFERENCE_NAMES:
        raise KeyError(f"the reference has no corruption {name!r}")
    value = stream_seed(np.random.default_rng(seed))
    kwargs = {"seed": value} if name in _SEED_ARGUMENT else {}
    with _global_seed(value), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return corrupt(image, severity=severity, corruption_name=name, **kwargs)

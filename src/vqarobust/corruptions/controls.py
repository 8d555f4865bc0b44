"""Controls: subsets that are not perturbations but tell how to read the ones that are.

``blank`` replaces every image with constant grey of its size. A model's accuracy on it
is its accuracy without the image: a model whose clean accuracy is close to that barely
uses the image, and then looks robust to every image perturbation for that reason alone.
Controls are kept out of the robustness metrics (their class is ``control``).
"""

from __future__ import annotations

import numpy as np

from vqarobust.corruptions.registry import CORRUPTIONS

CONTROL = "control"
GREY = 128


@CORRUPTIONS.register(family=CONTROL, benchmark=False, severities=1, removes_image=True)
def blank(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Constant grey (128) of the image's size."""
    return np.full_like(image, GREY)

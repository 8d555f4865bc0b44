"""Random streams of the corruptions.

The ImageNet-C reference draws from numpy's global legacy MT19937 state. The native
corruptions take an explicit ``np.random.Generator`` (never global state), derive one
32-bit seed from it, and draw the reference's numbers in the reference's order from a
local stream with that seed. Seeding the reference's global state with the same value
(``vqarobust.corruptions.reference``) therefore reproduces its output, which is how the
random corruptions are tested for faithfulness.
"""

from __future__ import annotations

import numpy as np


def stream_seed(rng: np.random.Generator) -> int:
    """The 32-bit seed a corruption derives from its generator (one draw)."""
    return int(rng.integers(0, 2**32 - 1))


def legacy_stream(rng: np.random.Generator) -> np.random.RandomState:
    """A local MT19937 stream equal to ``np.random.seed(stream_seed(rng))``'s global one."""
    return np.random.RandomState(stream_seed(rng))

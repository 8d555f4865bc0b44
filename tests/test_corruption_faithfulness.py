"""The native corruptions against the reference package (imagecorruptions, -imaug fork).

Every corruption but glass blur draws the reference's random numbers in the reference's
order (``vqarobust.corruptions.randomness``), so with the same seed its output is compared
pixel by pixel. Glass blur's scrambling runs on its own generator and is compared on
statistics: distortion per severity and the drift that its half-open offset range causes.
"""

import numpy as np
import pytest
from imagecorruptions import corruptions as ref

from vqarobust.corruptions import corrupt
from vqarobust.corruptions.blur import scramble_pixels
from vqarobust.corruptions.reference import REFERENCE_NAMES, reference_corrupt
from vqarobust.corruptions.samples import edge_cases, photo_like

SAME_STREAM = [n for n in REFERENCE_NAMES if n != "glass_blur"]
IMAGES = [photo_like(96, 128, 0), photo_like(72, 100, 1), edge_cases(64, 64), photo_like(33, 47, 2)]
# Issue 4 asks for 1 grey level; what the engine achieves is far tighter, and the test
# guards that (measured worst: brightness 0.07, defocus 0.04, saturate 0.03, others 0).
MAX_MEAN_ABS_DIFF = 0.25


def test_every_imagenet_c_corruption_is_compared():
    assert len(REFERENCE_NAMES) == 19
    assert set(REFERENCE_NAMES) <= set(ref.__dict__)


@pytest.mark.parametrize("name", SAME_STREAM)
def test_matches_the_reference_with_the_same_seed(name):
    for k, img in enumerate(IMAGES):
        for severity in range(1, 6):
            ours = corrupt(img, name, severity, seed=k).astype(float)
            theirs = reference_corrupt(img, name, severity, seed=k).astype(float)
            diff = np.abs(ours - theirs).mean()
            assert diff <= MAX_MEAN_ABS_DIFF, (name, severity, k, diff)


def test_a_different_seed_is_far_from_the_reference():
    # The comparison above is only meaningful if mismatched streams are caught.
    img = IMAGES[0]
    ours = corrupt(img, "gaussian_noise", 3, seed=1).astype(float)
    theirs = reference_corrupt(img, "gaussian_noise", 3, seed=2).astype(float)
    assert np.abs(ours - theirs).mean() > 20


def _ramps(h=64, w=96):
    y, x = np.mgrid[0:h, 0:w]
    along_x = np.repeat((x * 2.5)[..., None], 3, -1).astype(np.uint8)
    along_y = np.repeat((y * 3.5)[..., None], 3, -1).astype(np.uint8)
    return along_x, along_y


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_glass_blur_matches_the_reference_in_distribution(severity):
    photos = [photo_like(64, 96, s) for s in range(6)]

    def distortion(fn):
        return np.mean(
            [
                np.abs(fn(im, "glass_blur", severity, seed=k).astype(float) - im).mean()
                for k, im in enumerate(photos)
            ]
        )

    ours, theirs = distortion(corrupt), distortion(reference_corrupt)
    assert abs(ours / theirs - 1) < 0.05, (ours, theirs)
    # Offsets in [-d, d) move content by -1/2 pixel per copy on average: on a ramp that is
    # a negative drift, equal for both when the offset law and copy order are the same.
    inner = (slice(8, -8), slice(8, -8))
    for ramp in _ramps():

        def drift(fn, ramp=ramp):
            return np.mean(
                [
                    (fn(ramp, "glass_blur", severity, seed=k).astype(float) - ramp)[inner].mean()
                    for k in range(6)
                ]
            )

        ours, theirs = drift(corrupt), drift(reference_corrupt)
        assert abs(ours - theirs) < 0.1 * abs(theirs) + 0.1, (ours, theirs)


_MASK = (1 << 64) - 1


def _splitmix(state):
    """One splitmix64 step: (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def _splitmix_scramble(x, max_delta, iterations, seed):
    """The scrambling loop written plainly in Python (what ``_scramble`` compiles)."""
    state = seed
    h, w, _ = x.shape
    for _ in range(iterations):
        for i in range(h - max_delta, max_delta, -1):
            for j in range(w - max_delta, max_delta, -1):
                state, z = _splitmix(state)
                dx = (((z & 0xFFFFFFFF) * 2 * max_delta) >> 32) - max_delta
                dy = (((z >> 32) * 2 * max_delta) >> 32) - max_delta
                x[i, j] = x[i + dy, j + dx]
    return x


@pytest.mark.parametrize("max_delta, iterations", [(1, 2), (3, 1), (4, 2)])
def test_glass_blur_scramble_equals_its_plain_python_loop(max_delta, iterations):
    img = np.random.default_rng(0).integers(0, 256, (24, 30, 3), dtype=np.uint8)
    compiled = img.copy()
    scramble_pixels()(compiled, max_delta, iterations, 12345)
    assert np.array_equal(compiled, _splitmix_scramble(img.copy(), max_delta, iterations, 12345))


def _unique_pixels(h=40, w=40):
    ids = np.arange(h * w)
    return (
        np.stack([ids % 256, ids // 256, np.zeros_like(ids)], -1).reshape(h, w, 3).astype(np.uint8)
    )


def test_the_reference_glass_blur_copies_pixels_rather_than_swapping_them():
    # x[h, w], x[h', w'] = x[h', w'], x[h, w] on array views copies: some pixels are lost and
    # others duplicated. The engine reproduces that, not a permutation.
    img = _unique_pixels()
    theirs = ref._shuffle_pixels_njit_glass_blur(40, 40, img.copy(), (0.7, 1, 2), 3)
    ours = img.copy()
    scramble_pixels()(ours, 1, 2, 3)
    for out in (theirs, ours):
        n_unique = len(np.unique(out.reshape(-1, 3), axis=0))
        assert 0.4 * 1600 < n_unique < 0.8 * 1600
        # Every value still comes from the input.
        assert (out[..., 0].astype(int) + 256 * out[..., 1].astype(int) < 1600).all()


@pytest.mark.parametrize("max_delta", [1, 2, 3, 4])
def test_glass_blur_offsets_are_uniform_on_the_half_open_range(max_delta):
    span, n = 2 * max_delta, 40000
    counts = np.zeros((2, span), int)
    state = 7
    for _ in range(n):
        state, z = _splitmix(state)
        counts[0, ((z & 0xFFFFFFFF) * span) >> 32] += 1
        counts[1, ((z >> 32) * span) >> 32] += 1
    chi2 = ((counts - n / span) ** 2 / (n / span)).sum(axis=1)
    # 99.9% quantiles of chi-square with span - 1 degrees of freedom.
    assert (chi2 < {2: 10.8, 4: 16.3, 6: 20.5, 8: 24.3}[span]).all(), chi2

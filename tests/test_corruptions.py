import hashlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust import corruptions
from vqarobust.corruptions import corrupt, corrupt_item, max_severity, names, needs
from vqarobust.corruptions.physical import water_layer
from vqarobust.corruptions.samples import photo_like

BENCHMARK = [
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "defocus_blur",
    "zoom_blur",
    "snow",
    "brightness",
    "contrast",
    "saturate",
    "elastic_transform",
    "spatter",
    "pixelate",
    "jpeg_compression",
]
RANDOM = {
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "snow",
    "elastic_transform",
    "spatter",
    "glass_blur",
    "motion_blur",
    "frost",
    "fog",
}


# Corruptions that need nothing but the image (stylize needs weights and styles, the
# box-aware ones boxes: tests/test_stylize.py, tests/test_box_corruptions.py) and keep its
# size (low_resolution: tests/test_low_resolution.py).
SELF_CONTAINED = [n for n in names() if needs(n) is None and not corruptions.resizes(n)]


def _image(h, w, seed=0):
    rng = np.random.default_rng(seed)
    # Smooth gradients plus noise, like a photo rather than pure noise.
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (h + w)], axis=-1)
    return np.clip(base + rng.normal(0, 10, (h, w, 3)), 0, 255).astype(np.uint8)


def test_the_14_benchmark_corruptions_are_registered_with_classes():
    assert sorted(names(benchmark=True)) == sorted(BENCHMARK)
    assert corruptions.family("snow") == "weather"
    assert set(names(family="noise")) == {
        "gaussian_noise",
        "shot_noise",
        "impulse_noise",
        "speckle_noise",
    }
    assert max_severity("grayscale") == 1 and max_severity("fog") == 5
    assert names(family="stylize") == ["stylize"] and "AdaIN weights" in needs("stylize")


@pytest.mark.parametrize("name", SELF_CONTAINED)
@pytest.mark.parametrize("shape", [(32, 32), (64, 64), (480, 640), (37, 53), (53, 37)])
def test_every_severity_keeps_shape_and_dtype(name, shape):
    img = _image(*shape)
    before = img.copy()
    for severity in range(1, max_severity(name) + 1):
        out = corrupt(img, name, severity, seed=3)
        assert np.array_equal(img, before), "the input was modified"
        assert out.shape == img.shape and out.dtype == np.uint8
        assert out.flags.writeable and out.flags.c_contiguous
        if name != "contrast" or severity < 5:
            assert (out != img).any(), (name, severity)


@pytest.fixture(scope="module")
def large_image():
    return photo_like(3000, 4000, 0)


@pytest.mark.parametrize("name", SELF_CONTAINED)
def test_works_on_a_4000x3000_image(name, large_image):
    img = large_image
    out = corrupt(img, name, max_severity(name), seed=1)
    assert out.shape == img.shape and out.dtype == np.uint8


@given(
    name=st.sampled_from(SELF_CONTAINED),
    h=st.integers(32, 90),
    w=st.integers(32, 90),
    seed=st.integers(0, 2**63 - 1),
    data=st.data(),
)
@settings(max_examples=60, deadline=None)
def test_any_size_any_seed_gives_a_deterministic_image_of_that_size(name, h, w, seed, data):
    severity = data.draw(st.integers(1, max_severity(name)))
    img = _image(h, w, seed % 1000)
    out = corrupt(img, name, severity, seed=seed)
    assert out.shape == (h, w, 3) and out.dtype == np.uint8
    assert np.array_equal(out, corrupt(img, name, severity, seed=seed))


# Severity pairs (s, s + 1) where the distortion may drop, and why. They come from the
# ImageNet-C parameter tables themselves (docs/corruptions.md has the measured table).
NOT_MONOTONE = {
    "frost": {3: "severity 4 keeps less of the image (0.65 vs 0.7) under the same frost"},
    "glass_blur": {3: "severity 3 scrambles 3 times, severity 4 twice"},
    "saturate": {2: "severities 1-2 desaturate, 3-5 oversaturate"},
    "snow": {2: "severities 2 and 3 distort equally, either may come out ahead"},
}


@pytest.mark.parametrize("name", [n for n in SELF_CONTAINED if max_severity(n) == 5])
def test_distortion_does_not_decrease_with_severity(name):
    images = [photo_like(96, 128, s) for s in range(4)]
    distortion = [
        np.mean(
            [
                np.abs(corrupt(im, name, s, seed=k).astype(float) - im).mean()
                for k, im in enumerate(images)
            ]
        )
        for s in range(1, 6)
    ]
    for s in range(1, 5):
        drop = distortion[s - 1] - distortion[s]
        if s in NOT_MONOTONE.get(name, {}):
            continue
        assert drop <= 0, (name, s, distortion)
    if name == "snow":
        assert abs(distortion[1] - distortion[2]) < 2, distortion


@pytest.mark.parametrize("name", ["grayscale", "colour_inversion", "grayscale_inversion"])
def test_colour_transforms(name):
    img = _image(40, 48)
    out = corrupt(img, name, 1)
    assert out.shape == img.shape
    if name == "colour_inversion":
        assert (out == 255 - img).all()
    else:
        assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()
    with pytest.raises(ValueError, match="0..1"):
        corrupt(img, name, 2)


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_output_is_a_pure_function_of_the_seed(name):
    img = _image(48, 48)
    a = corrupt(img, name, 3, seed=11)
    b = corrupt(img, name, 3, seed=11)
    assert (a == b).all()
    # Global numpy state must neither matter nor be disturbed.
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    c = corrupt(img, name, 3, seed=11)
    assert (np.random.get_state()[1] == before).all()
    assert (a == c).all()
    d = corrupt(img, name, 3, seed=12)
    assert (a != d).any()


def _digests(corruption_names):
    img = _image(48, 64)
    return {
        name: hashlib.sha256(corrupt(img, name, 1, seed=5).tobytes()).hexdigest()
        for name in corruption_names
    }


def test_same_bytes_in_a_fresh_process():
    # A spawned interpreter has its own numpy state, hash seed and numba cache load.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        theirs = pool.submit(_digests, SELF_CONTAINED).result(timeout=120)
    assert theirs == _digests(SELF_CONTAINED)


def test_item_seed_depends_on_image_id_not_on_call_order():
    img = _image(48, 48)
    first = corrupt_item(img, "gaussian_noise", 2, 0, image_id=5)
    corrupt_item(img, "gaussian_noise", 2, 0, image_id=6)
    again = corrupt_item(img, "gaussian_noise", 2, 0, image_id=5)
    other = corrupt_item(img, "gaussian_noise", 2, 0, image_id=6)
    assert (first == again).all() and (first != other).any()


def test_severity_zero_is_the_clean_image():
    img = _image(32, 32)
    assert (corrupt(img, "snow", 0) == img).all()


def test_grayscale_and_rgba_inputs_are_converted():
    img = _image(32, 32)
    gray = img[..., 0]
    assert corrupt(gray, "brightness", 1).shape == (32, 32, 3)
    rgba = np.concatenate([img, np.full((32, 32, 1), 255, np.uint8)], axis=-1)
    assert (corrupt(rgba, "contrast", 2) == corrupt(img, "contrast", 2)).all()


def test_bad_inputs_raise_clear_errors():
    img = _image(32, 32)
    with pytest.raises(TypeError, match="uint8"):
        corrupt(img.astype(np.float32), "snow", 1)
    with pytest.raises(ValueError, match="at least 32x32"):
        corrupt(img[:16], "snow", 1)
    with pytest.raises(ValueError, match="severity"):
        corrupt(img, "snow", 6)
    with pytest.raises(KeyError, match="unknown corruption 'snowfall'"):
        corrupt(img, "snowfall", 1)
    with pytest.raises(ValueError, match="shape"):
        corrupt(np.zeros((32, 32, 2), np.uint8), "snow", 1)


def test_spatter_without_a_surviving_drop_adds_no_water():
    # The reference divides by zero here and returns NaN.
    with np.errstate(all="raise"):
        water = water_layer(np.zeros((32, 40)), 0.6)
    assert water.shape == (32, 40) and not water.any()
    drops = np.zeros((32, 40))
    drops[10:20, 10:20] = 0.8
    assert water_layer(drops, 0.6).max() == pytest.approx(0.6)

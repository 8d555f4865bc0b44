"""The shared image operations against the scipy / scikit-image / imagecorruptions calls
they replace."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from imagecorruptions import corruptions as ref
from skimage.filters import gaussian as skimage_gaussian

from vqarobust.corruptions import filters


def _noise(shape, seed=0):
    return np.random.default_rng(seed).random(shape)


@pytest.mark.parametrize("sigma", [0.32, 0.7, 1.5, 4, 6])
@pytest.mark.parametrize("mode", ["nearest", "reflect"])
def test_gaussian_filter_equals_skimage(sigma, mode):
    img = _noise((40, 56, 3))
    expected = skimage_gaussian(img, sigma=sigma, mode=mode, channel_axis=-1)
    assert np.abs(filters.gaussian_filter(img, sigma, mode=mode) - expected).max() < 1e-12


def test_gaussian_filter_per_axis_sigma_and_truncate_equal_skimage():
    img = _noise((48, 64))
    expected = skimage_gaussian(img, sigma=(0.48, 0.64), mode="reflect", truncate=3)
    got = filters.gaussian_filter(img, (0.48, 0.64), mode="reflect", truncate=3)
    assert np.abs(got - expected).max() < 1e-12


def test_gaussian_filter_of_uint8_is_float32_on_the_same_scale():
    img = (_noise((32, 40, 3)) * 255).astype(np.uint8)
    got = filters.gaussian_filter(img, 1.0)
    assert got.dtype == np.float32
    assert np.abs(got - filters.gaussian_filter(img.astype(np.float64), 1.0)).max() < 1e-3


def test_gaussian_filter_rejects_a_kernel_wider_than_the_image():
    with pytest.raises(ValueError, match="too large"):
        filters.gaussian_filter(_noise((10, 10)), 6)


@pytest.mark.parametrize("factor", [1.0, 1.03, 1.11, 1.3, 2.5, 4.5])
@pytest.mark.parametrize("shape", [(32, 32), (37, 53), (120, 90)])
def test_zoom_center_equals_imagecorruptions_clipped_zoom(factor, shape):
    img = _noise((*shape, 3)).astype(np.float32)
    expected = ref.clipped_zoom(img, factor)
    full = filters.zoom_center(img, factor, full=True, exact=True)
    assert full.shape == expected.shape
    assert np.abs(full - expected).max() < 1e-5
    # The warp-based default (cut to the image) differs by OpenCV's 1/32-pixel weights only.
    cut = filters.zoom_center(img, factor)
    assert cut.shape == img.shape
    assert np.abs(cut - expected[: shape[0], : shape[1]]).mean() < 2e-3


def test_zoom_center_on_a_smooth_image_is_within_a_thousandth_of_a_grey_level():
    y, x = np.mgrid[0:120, 0:160]
    img = np.stack([np.sin(x / 9.0), np.cos(y / 7.0), np.sin((x + y) / 13.0)], -1)
    img = ((img + 1) / 2).astype(np.float32)
    err = np.abs(filters.zoom_center(img, 1.17) - ref.clipped_zoom(img, 1.17)[:120, :160])
    assert err.mean() * 255 < 1e-3


@pytest.mark.parametrize("radius, alias", [(3, 0.1), (6, 0.5), (10, 0.5)])
def test_disk_kernel_equals_the_reference(radius, alias):
    assert np.array_equal(filters.disk_kernel(radius, alias), ref.disk(radius, alias))


@pytest.mark.parametrize("angle", [-135.0, -100.0, -45.0, 0.0, 12.5, 44.9])
@pytest.mark.parametrize("radius, sigma", [(10, 3), (20, 15)])
def test_directional_blur_equals_the_reference_motion_blur(angle, radius, sigma):
    img = (_noise((48, 64, 3)) * 255).astype(np.uint8)
    expected = ref._motion_blur(img, radius=radius, sigma=sigma, angle=angle)
    got = filters.directional_blur(img, radius, sigma, angle)
    assert np.abs(got - expected).max() < 1e-3


def test_directional_blur_stops_where_the_reference_stops_on_small_images():
    # radius 20 = 41 taps of up to 40 pixels: along a row they outgrow a 32-pixel image.
    img = (_noise((32, 32)) * 255).astype(np.uint8)
    shifts, taps = filters.motion_offsets(20, 15, 0.0, (32, 32))
    assert len(shifts) == 32 and taps.sum() < 1
    expected = ref._motion_blur(img, radius=20, sigma=15, angle=0.0)
    assert np.abs(filters.directional_blur(img, 20, 15, 0.0) - expected).max() < 1e-3


@pytest.mark.parametrize("size, decay", [(32, 2.0), (256, 1.4)])
def test_plasma_fractal_equals_the_reference_with_the_same_stream(size, decay):
    np.random.seed(5)  # noqa: NPY002  (the reference draws from the global state)
    expected = ref.plasma_fractal(mapsize=size, wibbledecay=decay)
    got = filters.plasma_fractal(size, decay, np.random.RandomState(5))
    assert np.array_equal(got, expected)


def test_plasma_fractal_needs_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        filters.plasma_fractal(48, 2.0, np.random.RandomState(0))


@given(st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=50))
@settings(max_examples=50, deadline=None)
def test_to_uint8_truncates_like_np_uint8_of_clipped_values(values):
    x = np.array(values)
    expected = np.uint8(np.clip(x, 0, 1) * 255)  # imagecorruptions' conversion
    assert np.array_equal(filters.to_uint8(x.copy()), expected)
    assert np.array_equal(filters.to_uint8(x * 255, 1.0), np.uint8(np.clip(x * 255, 0, 255)))

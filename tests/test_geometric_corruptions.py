"""The corruptions beyond ImageNet-C (docs/corruptions.md): geometric, resolution and
occlusion. Their severity scales (SSIM falls over the five levels), determinism per
item, and the operations they stand for, computed independently (OpenCV, Pillow) or by
albumentations itself with the item's draws."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vqarobust import corruptions
from vqarobust.corruptions import corrupt, corrupt_item, geometric, occlusion, resolution
from vqarobust.corruptions.quality import ssim_psnr
from vqarobust.corruptions.samples import photo_like

NEW = {
    "geometric": {"rotate", "shear", "translate", "perspective", "zoom_crop"},  # and the flip
    "resolution": {"downscale_nearest", "downscale_bilinear", "downscale_bicubic", "jpeg_chain"},
    "occlusion": {"cutout", "random_patches"},
}
ALL = sorted(set().union(*NEW.values()))


def test_registered_with_their_families_outside_the_benchmark():
    # The flip (tests/test_flip.py), the box-aware ones (tests/test_box_corruptions.py) and
    # native low resolution (tests/test_low_resolution.py).
    others = {
        "geometric": {"horizontal_flip", "object_crop"},
        "occlusion": {"occlude_context"},
        "resolution": {"low_resolution"},
    }
    for family, members in NEW.items():
        extra = others.get(family, set())
        assert set(corruptions.names(family=family)) == members | extra
    assert not set(ALL) & set(corruptions.names(benchmark=True))
    assert all(corruptions.max_severity(n) == 5 for n in ALL)
    assert corruptions.max_severity("horizontal_flip") == 1  # tests/test_flip.py


@pytest.mark.parametrize("name", ALL)
def test_ssim_falls_over_the_five_severities(name):
    images = [photo_like(96, 128, seed) for seed in range(3)]
    ssim = [
        np.mean([ssim_psnr(im, corrupt(im, name, s, seed=k))[0] for k, im in enumerate(images)])
        for s in range(1, 6)
    ]
    assert all(a > b for a, b in zip(ssim, ssim[1:], strict=False)), (name, ssim)
    assert ssim[0] < 0.999, (name, ssim)  # severity 1 already changes the image


@pytest.mark.parametrize("name", ALL)
def test_the_same_item_gives_the_same_bytes_another_item_may_not(name):
    image = photo_like(64, 80, 1)
    a = corrupt_item(image, name, 3, 7, "img-1")
    assert np.array_equal(a, corrupt_item(image.copy(), name, 3, 7, "img-1"))
    others = [corrupt_item(image, name, 3, 7, f"img-{i}") for i in range(2, 8)]
    random = {"rotate", "shear", "translate", "perspective", "cutout", "random_patches"}
    assert any(not np.array_equal(a, o) for o in others) == (name in random)


def test_rotation_is_opencvs_rotation_about_the_centre():
    """albumentations' Affine rotation, as used, is a counter-clockwise rotation by the
    angle about the image's centre (OpenCV's convention), the border black."""
    image = photo_like(120, 160, 2)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        sign = 1 if rng.random() < 0.5 else -1
        out = geometric.rotate(image, 3, np.random.default_rng(seed))
        angle = sign * geometric.ROTATE_DEGREES[2]
        matrix = cv2.getRotationMatrix2D(((160 - 1) / 2, (120 - 1) / 2), angle, 1.0)
        expected = cv2.warpAffine(
            image,
            matrix,
            (160, 120),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )
        inner = (slice(20, 100), slice(30, 130))
        diff = np.abs(out[inner].astype(float) - expected[inner]).mean()
        assert diff < 1.0, (seed, diff)


def test_the_translation_moves_the_image_by_its_fraction():
    image = photo_like(100, 100, 3)
    rng = np.random.default_rng(5)
    theta = rng.uniform(0, 2 * np.pi)
    out = geometric.translate(image, 2, np.random.default_rng(5))
    dx, dy = (round(0.1 * 100 * c) for c in (np.cos(theta), np.sin(theta)))
    shifted = np.zeros_like(image)
    src = image[max(0, -dy) : 100 - max(0, dy), max(0, -dx) : 100 - max(0, dx)]
    shifted[max(0, dy) : max(0, dy) + src.shape[0], max(0, dx) : max(0, dx) + src.shape[1]] = src
    inner = (slice(15, 85), slice(15, 85))
    assert np.abs(out[inner].astype(float) - shifted[inner]).mean() < 3.0


def test_zoom_crop_is_the_centre_crop_scaled_up():
    image = photo_like(100, 120, 4)
    out = geometric.zoom_crop(image, 5, np.random.default_rng(0))
    crop = image[25:75, 30:90]
    expected = cv2.resize(crop, (120, 100), interpolation=cv2.INTER_LINEAR)
    assert np.abs(out.astype(float) - expected).mean() < 2.0


@pytest.mark.parametrize(
    "name, flag",
    [
        ("downscale_nearest", cv2.INTER_NEAREST),
        ("downscale_bilinear", cv2.INTER_LINEAR),
        ("downscale_bicubic", cv2.INTER_CUBIC),
    ],
)
def test_downscaling_is_an_area_average_then_the_named_filter(name, flag):
    image = photo_like(96, 144, 5)
    for severity, factor in enumerate(resolution.DOWNSCALE_FACTOR, 1):
        small = cv2.resize(
            image, (round(144 * factor), round(96 * factor)), interpolation=cv2.INTER_AREA
        )
        expected = cv2.resize(small, (144, 96), interpolation=flag)
        out = corrupt(image, name, severity)
        assert np.abs(out.astype(float) - expected).mean() < 0.5, (name, severity)


def test_a_jpeg_chain_loses_more_than_one_encode_at_its_last_quality():
    import io

    from PIL import Image

    image = photo_like(64, 64, 6)
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=resolution.JPEG_CHAIN_QUALITY[-1])
    once = np.array(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    out = corrupt(image, "jpeg_chain", 5)
    assert out.shape == image.shape
    assert np.abs(out.astype(float) - image).mean() > np.abs(once.astype(float) - image).mean()


@pytest.mark.parametrize("shape", [(32, 32), (37, 53), (480, 640)])
def test_a_cutout_hides_its_area_in_one_black_square(shape):
    h, w = shape
    image = np.full((h, w, 3), 200, np.uint8)
    for severity, area in enumerate(occlusion.AREA, 1):
        out = corrupt_item(image, "cutout", severity, 0, "x")
        black = np.flatnonzero((out == 0).all(axis=2).any(axis=1))
        rows, cols = np.nonzero((out == 0).all(axis=2))
        side = round(np.sqrt(area * h * w))
        assert (rows.max() - rows.min() + 1, cols.max() - cols.min() + 1) == (side, side)
        assert len(rows) == side * side and len(black) == side
        assert abs(side * side / (h * w) - area) < 2 * side / (h * w) + 1e-9


def test_random_patches_hide_at_most_their_area():
    image = np.full((120, 160, 3), 7, np.uint8)
    image[..., 1] = 9  # no patch's grey can match it in every channel
    for severity, area in enumerate(occlusion.AREA, 1):
        out = corrupt_item(image, "random_patches", severity, 0, "y")
        hidden = (out != image).any(axis=2).mean()
        assert 0 < hidden <= area + 1e-9


@pytest.mark.parametrize("name", ["rotate", "shear", "translate"])
def test_the_border_policy_fills_what_the_transform_uncovers(name):
    import albumentations as A

    image = np.full((64, 96, 3), 180, np.uint8)
    image[:, :48] = 60  # two halves: a mirrored border is not one grey
    outs = {b: corrupt(image, name, 5, seed=3, border=b) for b in geometric.BORDERS}
    black = (outs["constant"] == 0).all(axis=2)
    assert black.any()  # the uncovered part
    # Away from the uncovered part (whose edge pixels interpolate with the fill), every
    # policy gives the same pixels.
    inside = cv2.erode((~black).astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    for border in ("reflect", "replicate"):
        assert not (outs[border] == 0).all(axis=2).any(), border
        assert np.array_equal(outs[border][inside], outs["constant"][inside])
    assert corruptions.options(name) == ("border",)
    if name == "rotate":  # the draw replayed: albumentations with that border mode
        rng = np.random.default_rng(3)
        angle = (1 if rng.random() < 0.5 else -1) * geometric.ROTATE_DEGREES[4]
        direct = A.Affine(rotate=(angle, angle), border_mode=4, p=1.0)(image=image)["image"]
        assert np.array_equal(outs["reflect"], direct)
    with pytest.raises(ValueError, match="border must be one of constant, reflect, replicate"):
        corrupt(image, name, 1, border="wrap")


def test_only_the_corruptions_that_take_an_option_accept_it(tmp_path, easy_vqa_eval):
    """Perspective and the centre zoom uncover no border: they take no border option."""
    from vqarobust.materialize.images import corrupt_subset

    for name in ("perspective", "zoom_crop", "snow"):
        assert corruptions.options(name) == ()
    n = corrupt_subset(
        easy_vqa_eval["images"], tmp_path / "rot", "rotate", 2, options={"border": "reflect"}
    )
    assert n > 0
    with pytest.raises(ValueError, match="snow takes no option border"):
        corrupt_subset(
            easy_vqa_eval["images"], tmp_path / "snow", "snow", 1, options={"border": "reflect"}
        )

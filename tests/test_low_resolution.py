"""Native low resolution (docs/corruptions.md, "Native low resolution"): the image stored
small, the model's processor scaling it; its quality scores at the clean size equal
downscale_bicubic's (albumentations' Downscale), its subset records the small size."""

from __future__ import annotations

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

from vqarobust import corruptions, store
from vqarobust.config import ConfigError, validate_config
from vqarobust.corruptions import corrupt, corrupt_item
from vqarobust.corruptions.quality import at_size, ssim_psnr
from vqarobust.corruptions.resolution import DOWNSCALE_FACTOR
from vqarobust.corruptions.samples import photo_like


def test_only_low_resolution_resizes():
    assert [n for n in corruptions.names() if corruptions.resizes(n)] == ["low_resolution"]
    assert corruptions.family("low_resolution") == "resolution"
    assert corruptions.needs("low_resolution") is None


@pytest.mark.parametrize("shape", [(32, 32), (37, 53), (480, 640)])
def test_each_side_shrinks_by_its_factor(shape):
    image = photo_like(*shape, 0)
    for severity, factor in enumerate(DOWNSCALE_FACTOR, 1):
        out = corrupt(image, "low_resolution", severity, 0)
        # OpenCV rounds each side of fx * side to the nearest pixel.
        assert out.shape == (round(shape[0] * factor), round(shape[1] * factor), 3)
        assert out.dtype == np.uint8 and out.flags.c_contiguous
    assert corrupt(photo_like(32, 32, 0), "low_resolution", 5, 0).shape == (4, 4, 3)


@pytest.mark.parametrize("severity", [1, 3, 5])
def test_scaled_back_it_is_albumentations_downscale(severity):
    """downscale_bicubic is albumentations' Downscale (area down, bicubic up): the small
    image scaled back by at_size is that image exactly, so the quality scores agree."""
    import albumentations as A

    image = photo_like(96, 128, severity)
    small = corrupt(image, "low_resolution", severity, 0)
    f = DOWNSCALE_FACTOR[severity - 1]
    reference = A.Downscale(
        scale_range=(f, f),
        p=1.0,
        interpolation_pair={"downscale": cv2.INTER_AREA, "upscale": cv2.INTER_CUBIC},
    )
    assert np.array_equal(at_size(small, 96, 128), reference(image=image)["image"])
    assert np.array_equal(at_size(small, 96, 128), corrupt(image, "downscale_bicubic", severity, 0))


def test_ssim_at_the_clean_size_falls_over_the_five_severities():
    images = [photo_like(96, 128, seed) for seed in range(3)]
    ssim = [
        np.mean(
            [
                ssim_psnr(im, at_size(corrupt(im, "low_resolution", s, 0), 96, 128))[0]
                for im in images
            ]
        )
        for s in range(1, 6)
    ]
    assert all(a > b for a, b in zip(ssim, ssim[1:], strict=False)), ssim


def test_it_draws_nothing():
    image = photo_like(64, 80, 1)
    a = corrupt_item(image, "low_resolution", 3, 7, "img-1")
    assert all(
        np.array_equal(a, corrupt_item(image, "low_resolution", 3, s, i))
        for s, i in ((7, "img-2"), (8, "img-1"))
    )


def test_its_subset_stores_small_images_with_quality_at_the_clean_size(tmp_path, easy_vqa_eval):
    from vqarobust.materialize.images import corrupt_subset

    corrupt_subset(easy_vqa_eval["images"], tmp_path / "low", "low_resolution", 4)
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "bicubic", "downscale_bicubic", 4)
    low = pq.read_table(list((tmp_path / "low").glob("shard-*.parquet"))).sort_by("image_id")
    bicubic = pq.read_table(list((tmp_path / "bicubic").glob("shard-*.parquet")))
    bicubic = bicubic.sort_by("image_id")
    sizes = zip(low["width"].to_pylist(), low["height"].to_pylist(), strict=True)
    assert set(sizes) == {(11, 11)}  # 64 / 6
    assert {store.decode_image(b).shape for b in low["bytes"].to_pylist()} == {(11, 11, 3)}
    assert low["ssim"].to_pylist() == bicubic["ssim"].to_pylist()
    assert low["psnr"].to_pylist() == bicubic["psnr"].to_pylist()
    assert set(bicubic["width"].to_pylist()) == {64}


def test_thumbnails_show_a_small_image_at_the_clean_size():
    import io

    from PIL import Image

    from vqarobust.samples import thumbnail

    small = store.encode_image(corrupt(photo_like(64, 64, 0), "low_resolution", 5, 0))
    plain = Image.open(io.BytesIO(thumbnail(small, 112)))
    shown = Image.open(io.BytesIO(thumbnail(small, 112, shown_as=(64, 64))))
    assert plain.size == (8, 8) and shown.size == (64, 64)


def test_detector_features_refuse_it():
    config = {
        "dataset": {"name": "s", "adapter": "scenes"},
        "corruptions": ["snow", "low_resolution"],
        "features": {"det": {"kind": "detector", "dim": 8, "epochs": 1}},
        "models": {
            "lx": {
                "family": "lxmert",
                "features": "det",
                "train": {"architecture": "lxmert", "epochs": 1},
            }
        },
    }
    message = r"corruptions\[1\]: 'low_resolution' stores smaller images, and models.lx reads"
    with pytest.raises(ConfigError, match=message):
        validate_config(config)
    config["features"] = {"sight": {"kind": "perfect_sight"}}
    config["models"]["lx"]["features"] = "sight"
    assert validate_config(config)["corruptions"] == ["snow", "low_resolution"]

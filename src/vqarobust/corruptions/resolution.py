"""Resolution corruptions: the image downsampled and scaled back up (the detail a low
resolution loses), with the upsampling filter named in the corruption; the image
downsampled and left small (``low_resolution``: the model's own processor scales it up,
so its resize policy is part of what is measured); and JPEG re-encoding chains.

Downsampling is OpenCV's area average (``INTER_AREA``, no aliasing), upsampling nearest,
bilinear or bicubic, both through albumentations' ``Downscale``. A JPEG chain re-encodes
the image at falling qualities through Pillow (libjpeg, as ``jpeg_compression``), as an
image re-shared through services that each recompress it does.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from vqarobust.corruptions.registry import CORRUPTIONS

DOWNSCALE_FACTOR = (1 / 2, 1 / 3, 1 / 4, 1 / 6, 1 / 8)
# Severity s re-encodes at the first s + 1 qualities, each lower than the one before.
JPEG_CHAIN_QUALITY = (95, 85, 75, 65, 55, 45)


def _downscale(image: np.ndarray, severity: int, upscale: int) -> np.ndarray:
    import albumentations as A
    import cv2

    # At 1/8 of corrupt()'s smallest input (32 pixels) a side keeps 4 pixels.
    factor = DOWNSCALE_FACTOR[severity - 1]
    transform = A.Downscale(
        scale_range=(factor, factor),
        interpolation_pair={"downscale": cv2.INTER_AREA, "upscale": upscale},
        p=1.0,
    )
    return np.ascontiguousarray(transform(image=image)["image"])


@CORRUPTIONS.register(family="resolution")
def downscale_nearest(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Area-downsampled to ``DOWNSCALE_FACTOR`` of each side, nearest-neighbour back up."""
    return _downscale(image, severity, 0)  # cv2.INTER_NEAREST


@CORRUPTIONS.register(family="resolution")
def downscale_bilinear(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Area-downsampled to ``DOWNSCALE_FACTOR`` of each side, bilinear back up."""
    return _downscale(image, severity, 1)  # cv2.INTER_LINEAR


@CORRUPTIONS.register(family="resolution")
def downscale_bicubic(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Area-downsampled to ``DOWNSCALE_FACTOR`` of each side, bicubic back up."""
    return _downscale(image, severity, 2)  # cv2.INTER_CUBIC


@CORRUPTIONS.register(family="resolution", resizes=True)
def low_resolution(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Area-downsampled to ``DOWNSCALE_FACTOR`` of each side and stored at that size (the
    first half of albumentations' ``Downscale``, the same ``cv2.resize`` call, so
    ``downscale_*`` scale exactly this image back up). At 1/8 of ``corrupt()``'s
    smallest input a side keeps 4 pixels."""
    import cv2

    factor = DOWNSCALE_FACTOR[severity - 1]
    small = cv2.resize(image, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(small)


@CORRUPTIONS.register(family="resolution")
def jpeg_chain(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Re-encoded as JPEG ``severity + 1`` times at the qualities of ``JPEG_CHAIN_QUALITY``
    (95, then 85, ..., down to 45 at severity 5), decoded after each."""
    out = image
    for quality in JPEG_CHAIN_QUALITY[: severity + 1]:
        buf = io.BytesIO()
        Image.fromarray(out).save(buf, format="JPEG", quality=quality)
        with Image.open(io.BytesIO(buf.getvalue())) as decoded:
            out = np.array(decoded.convert("RGB"))
    return out

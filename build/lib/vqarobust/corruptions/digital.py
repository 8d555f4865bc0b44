"""Digital corruptions: pixelation and JPEG compression (both through Pillow, as the
reference: they are defined by Pillow's BOX/NEAREST resampling and libjpeg's encoder)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from vqarobust.corruptions.registry import CORRUPTIONS

JPEG_QUALITY = (25, 18, 15, 10, 7)


@CORRUPTIONS.register(family="digital", benchmark=True)
def pixelate(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Box-downsampled to ``factor`` of the size, then blown back up with nearest neighbour."""
    factor = (0.6, 0.5, 0.4, 0.3, 0.25)[severity - 1]
    h, w = image.shape[:2]
    small = Image.fromarray(image).resize((int(w * factor), int(h * factor)), Image.Resampling.BOX)
    return np.array(small.resize((w, h), Image.Resampling.NEAREST))


@CORRUPTIONS.register(family="digital", benchmark=True)
def jpeg_compression(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Encoded as JPEG at a low quality and decoded."""
    with Image.open(io.BytesIO(jpeg_compression_bytes(image, severity))) as decoded:
        return np.array(decoded.convert("RGB"))


def jpeg_compression_bytes(image: np.ndarray, severity: int) -> bytes:
    """The JPEG file that ``jpeg_compression`` decodes: storing it keeps the corruption's
    own compressed bytes instead of re-encoding its decoded output."""
    if not 1 <= severity <= len(JPEG_QUALITY):
        raise ValueError(f"jpeg_compression severity must be 1..5, got {severity}")
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=JPEG_QUALITY[severity - 1])
    return buf.getvalue()

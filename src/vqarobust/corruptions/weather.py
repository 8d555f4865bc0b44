"""Weather corruptions: snow, frost, fog."""

from __future__ import annotations

import functools
import importlib.resources

import cv2
import numpy as np

from vqarobust.corruptions.filters import directional_blur, plasma_fractal, to_uint8, zoom_center
from vqarobust.corruptions.randomness import legacy_stream
from vqarobust.corruptions.registry import CORRUPTIONS

# The six frost photographs of ImageNet-C, as shipped inside the imagecorruptions package.
FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg", "frost6.jpg")


@CORRUPTIONS.register(family="weather", benchmark=True)
def snow(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Falling snow: thresholded, zoomed Gaussian noise streaked by motion blur, added twice
    (the layer and its 180-degree rotation) over a brightened, washed-out image."""
    # mean, sd, zoom, threshold, blur radius, blur sigma, image weight
    mean, sd, zoom, threshold, radius, sigma, keep = (
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    )[severity - 1]
    h, w = image.shape[:2]
    stream = legacy_stream(rng)
    # legacy normal(loc, scale) is loc + scale * standard_normal(), bit for bit, but slower.
    noise = stream.standard_normal(size=(h, w)) * sd + mean
    layer = zoom_center(noise, zoom, full=True, exact=True)
    layer[layer < threshold] = 0
    np.clip(layer, 0, 1, out=layer)
    layer = directional_blur(layer, radius, sigma, stream.uniform(-135, -45))
    # The reference quantizes the snow layer to 8 bits before cropping it to the image.
    layer = (np.round(layer * 255).astype(np.uint8) / 255.0)[:h, :w, None]
    x = image.astype(np.float32) / 255
    gray = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY)[..., None]
    x = keep * x + (1 - keep) * np.maximum(x, gray * 1.5 + 0.5)
    # The reference's dtypes and order of additions (float32 image + float64 layers): many
    # sums land on integers once scaled, where truncation follows the last bit.
    out = x.astype(np.float64)
    out += layer
    out += np.rot90(layer, k=2)
    return to_uint8(out)


@functools.lru_cache(maxsize=len(FROST_FILES))
def frost_photo(index: int) -> np.ndarray:
    """Frost photograph ``index`` (0..5) as a read-only BGR uint8 array."""
    ref = importlib.resources.files("imagecorruptions") / "frost" / FROST_FILES[index]
    with importlib.resources.as_file(ref) as path:
        photo = cv2.imread(str(path))
    if photo is None:
        raise FileNotFoundError(f"{FROST_FILES[index]} is missing from imagecorruptions/frost")
    photo.flags.writeable = False
    return photo


@CORRUPTIONS.register(family="weather", benchmark=False)
def frost(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """A random crop of one of six frost photographs blended over the image."""
    image_weight, frost_weight = ((1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75))[
        severity - 1
    ]
    h, w = image.shape[:2]
    stream = legacy_stream(rng)
    photo = frost_photo(int(stream.randint(6)))
    fh, fw = photo.shape[:2]
    # Enlarge the photograph until it covers the image, with 10% to spare.
    scale = 1.1 * max(1.0, h / fh, w / fw)
    photo = cv2.resize(
        photo,
        dsize=(int(np.ceil(fw * scale)), int(np.ceil(fh * scale))),
        interpolation=cv2.INTER_CUBIC,
    )
    top = stream.randint(0, photo.shape[0] - h)
    left = stream.randint(0, photo.shape[1] - w)
    crop = photo[top : top + h, left : left + w, ::-1]  # BGR -> RGB
    return to_uint8(image_weight * image.astype(np.float64) + frost_weight * crop, 1.0)


@CORRUPTIONS.register(family="weather", benchmark=False)
def fog(image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
    """A plasma-fractal haze added to the image, then rescaled to its original peak."""
    strength, decay = ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4))[severity - 1]
    h, w = image.shape[:2]
    size = 1 << (max(h, w) - 1).bit_length()
    x = image / 255.0
    peak = x.max()
    x += strength * plasma_fractal(size, decay, legacy_stream(rng))[:h, :w, None]
    return to_uint8(x * peak / (peak + strength))

"""Image operations the corruptions share, each equal to the one ``imagecorruptions`` calls
(scipy / scikit-image / its own helpers) but on OpenCV kernels, several times faster.

Each function names the reference operation it stands for; ``tests/test_corruption_filters.py``
checks it against that operation.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

# scipy.ndimage / scikit-image boundary modes -> OpenCV border types.
_BORDERS = {
    "nearest": cv2.BORDER_REPLICATE,  # a a a | a b c | c c c
    "reflect": cv2.BORDER_REFLECT,  # c b a | a b c | c b a
    "mirror": cv2.BORDER_REFLECT_101,  # c b | a b c | b a
}


def gaussian_kernel(sigma: float, truncate: float = 4.0) -> np.ndarray:
    """The normalized 1-D Gaussian that ``scipy.ndimage.gaussian_filter`` uses (radius
    ``int(truncate * sigma + 0.5)``)."""
    if sigma == 0:
        return np.ones(1)
    radius = int(truncate * float(sigma) + 0.5)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    phi = np.exp(-0.5 / (float(sigma) ** 2) * x**2)
    return phi / phi.sum()


def gaussian_filter(
    image: np.ndarray,
    sigma: float | tuple[float, float],
    mode: str = "nearest",
    truncate: float = 4.0,
) -> np.ndarray:
    """``skimage.filters.gaussian(image, sigma, mode=mode, truncate=truncate,
    channel_axis=-1)`` for float HxW or HxWxC arrays (channels filtered separately).

    ``sigma`` is one value or (rows, columns). Float32 and float64 are kept; uint8 is
    filtered to float32 on its 0..255 scale (no conversion pass).
    """
    sy, sx = (sigma, sigma) if np.isscalar(sigma) else sigma
    if image.dtype not in (np.float32, np.float64, np.uint8):
        raise TypeError(f"gaussian_filter takes uint8, float32 or float64, not {image.dtype}")
    out_dtype = np.float32 if image.dtype == np.uint8 else image.dtype
    ky = gaussian_kernel(sy, truncate).astype(out_dtype)
    kx = gaussian_kernel(sx, truncate).astype(out_dtype)
    _check_kernel_fits(image, len(ky) // 2, len(kx) // 2)
    depth = cv2.CV_32F if out_dtype == np.float32 else cv2.CV_64F
    return cv2.sepFilter2D(image, depth, kx, ky, borderType=_BORDERS[mode])


def _check_kernel_fits(image: np.ndarray, ry: int, rx: int) -> None:
    # OpenCV reflects once; a kernel wider than the image would need repeated reflection.
    if ry >= image.shape[0] or rx >= image.shape[1]:
        raise ValueError(f"filter radius ({ry}, {rx}) too large for an image of {image.shape[:2]}")


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The anti-aliased disk of ImageNet-C's defocus blur (float32, sums to ~1)."""
    if radius <= 8:
        span, ksize = np.arange(-8, 9), (3, 3)
    else:
        span, ksize = np.arange(-radius, radius + 1), (5, 5)
    xx, yy = np.meshgrid(span, span)
    disk = np.asarray(xx**2 + yy**2 <= radius**2, dtype=np.float32)
    disk /= disk.sum()
    return cv2.GaussianBlur(disk, ksize=ksize, sigmaX=alias_blur)


def zoom_center(
    image: np.ndarray, factor: float, full: bool = False, exact: bool = False
) -> np.ndarray:
    """``imagecorruptions.clipped_zoom``: the centre ``ceil(size / factor)`` crop, enlarged by
    ``factor`` with ``scipy.ndimage.zoom(order=1)``.

    scipy maps output index ``i`` to input ``i * (n_in - 1) / (n_out - 1)`` (corners
    aligned) with ``n_out = round(n_in * factor)``. One affine warp does the same, with
    OpenCV's 1/32-pixel interpolation weights: invisible on photographs (mean error ~1e-4
    grey levels), but enough to flip thresholds on white noise, so ``exact`` interpolates
    in float64 instead (rows, then columns). The result is cut to the input's size (what
    every caller keeps) unless ``full`` asks for all of it.
    """
    h, w = image.shape[:2]
    crop_h, crop_w = math.ceil(h / factor), math.ceil(w / factor)
    top, left = (h - crop_h) // 2, (w - crop_w) // 2
    out_h, out_w = round(crop_h * factor), round(crop_w * factor)
    scale_y = (crop_h - 1) / (out_h - 1) if out_h > 1 else 0.0
    scale_x = (crop_w - 1) / (out_w - 1) if out_w > 1 else 0.0
    if not full:
        out_h, out_w = min(h, out_h), min(w, out_w)
    if exact:
        crop = image[top : top + crop_h, left : left + crop_w]
        rows = _lerp_axis(crop, np.arange(out_h) * scale_y, axis=0)
        return _lerp_axis(rows, np.arange(out_w) * scale_x, axis=1)
    matrix = np.array([[scale_x, 0.0, left], [0.0, scale_y, top]])
    return cv2.warpAffine(
        image,
        matrix,
        (out_w, out_h),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REPLICATE,
    )


def _lerp_axis(a: np.ndarray, coords: np.ndarray, axis: int) -> np.ndarray:
    """Linear interpolation of ``a`` at fractional positions ``coords`` along ``axis``."""
    lo = np.floor(coords).astype(np.intp)
    hi = np.minimum(lo + 1, a.shape[axis] - 1)
    frac = coords - lo
    frac = frac.reshape((-1,) + (1,) * (a.ndim - 1 - axis))
    return np.take(a, lo, axis=axis) * (1 - frac) + np.take(a, hi, axis=axis) * frac


def motion_offsets(radius: int, sigma: float, angle: float, shape: tuple[int, int]) -> tuple:
    """The (dy, dx) shifts and weights of ImageNet-C's motion blur: ``2 * radius + 1`` taps of a
    half-Gaussian along ``angle`` degrees, stopping (unrenormalized, as the reference does)
    at the first shift that leaves an image of ``shape``."""
    width = 2 * radius + 1
    taps = np.exp(-(np.arange(width) ** 2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    taps /= taps.sum()
    py, px = width * math.sin(math.radians(angle)), width * math.cos(math.radians(angle))
    hypot = math.hypot(py, px)
    shifts: list[tuple[int, int]] = []
    for i in range(width):
        dy = -math.ceil(i * py / hypot - 0.5)
        dx = -math.ceil(i * px / hypot - 0.5)
        if abs(dy) >= shape[0] or abs(dx) >= shape[1]:
            break
        shifts.append((dy, dx))
    return shifts, taps[: len(shifts)]


def directional_blur(image: np.ndarray, radius: int, sigma: float, angle: float) -> np.ndarray:
    """ImageNet-C's ``_motion_blur``: a weighted sum of copies shifted by (dy, dx) with the edge
    row/column repeated into the gap (``np.roll`` then edge fill), as float32."""
    h, w = image.shape[:2]
    shifts, taps = motion_offsets(radius, sigma, angle, (h, w))
    if not shifts:
        return np.zeros(image.shape, np.float32)
    pad_y = max(abs(dy) for dy, _ in shifts)
    pad_x = max(abs(dx) for _, dx in shifts)
    pad = ((pad_y, pad_y), (pad_x, pad_x)) + ((0, 0),) * (image.ndim - 2)
    padded = np.pad(image.astype(np.float32, copy=False), pad, mode="edge")
    out = np.zeros(image.shape, np.float32)
    tmp = np.empty_like(out)
    for (dy, dx), tap in zip(shifts, taps, strict=True):
        # shifted[y, x] = image[clamp(y - dy), clamp(x - dx)]
        window = padded[pad_y - dy : pad_y - dy + h, pad_x - dx : pad_x - dx + w]
        np.multiply(window, np.float32(tap), out=tmp)
        out += tmp
    return out


def plasma_fractal(size: int, decay: float, rs: np.random.RandomState) -> np.ndarray:
    """ImageNet-C's diamond-square height map (``size`` a power of two), scaled to [0, 1].

    Draws ``rs.uniform`` in the reference's order (squares, then the two diamond sets, per
    level), so a RandomState seeded like the reference's global state gives its map.
    """
    if size < 2 or size & (size - 1):
        raise ValueError(f"plasma size must be a power of two >= 2, got {size}")
    grid = np.empty((size, size), dtype=np.float32)
    grid[0, 0] = 0
    step, wibble = size, 100.0

    def jitter(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rs.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = grid[0:size:step, 0:size:step]
        squares = corners + np.roll(corners, -1, axis=0)
        squares += np.roll(squares, -1, axis=1)
        grid[half:size:step, half:size:step] = jitter(squares)
        centres = grid[half:size:step, half:size:step]
        corners = grid[0:size:step, 0:size:step]
        # Grouped as the reference adds, so float32 rounding matches.
        left = (centres + np.roll(centres, 1, axis=0)) + (corners + np.roll(corners, -1, axis=1))
        grid[0:size:step, half:size:step] = jitter(left)
        top = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=0))
        grid[half:size:step, 0:size:step] = jitter(top)
        step //= 2
        wibble /= decay
    grid -= grid.min()
    return grid / grid.max()


def to_uint8(x: np.ndarray, scale: float = 255.0) -> np.ndarray:
    """``np.uint8(np.clip(x * scale, 0, 255))``: truncation, as ``imagecorruptions.corrupt``
    converts its float output.

    ``x``, a float temporary, is scaled and clipped in place: two fewer image-sized
    allocations per call, which at COCO sizes cost page faults worth a few milliseconds.
    """
    if scale != 1:
        np.multiply(x, scale, out=x)
    np.clip(x, 0, 255, out=x)
    return x.astype(np.uint8)

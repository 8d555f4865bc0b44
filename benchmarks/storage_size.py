"""Bytes per stored image, PNG vs JPEG q95, and the disk the paper protocol needs.

    .venv/bin/python benchmarks/storage_size.py

Real photographs shipped with scikit-image (astronaut, coffee, chelsea, rocket,
motorcycle), resized to COCO's 640x480 (480x640 when portrait), each corrupted with the
14 benchmark corruptions at severities 1-5 and encoded as the workflow stores it
(``store.encode_image``: PNG at compress level 1, or JPEG at quality 95;
jpeg_compression always keeps its own JPEG bytes). The clean images are stored as the
dataset ships them (COCO: JPEG). Prints the mean bytes per image for each encoding and
the estimate for 70 corrupted subsets of 3,000 images.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import skimage.data
from PIL import Image

from vqarobust import store
from vqarobust.corruptions import corrupt_item, to_rgb
from vqarobust.corruptions.digital import jpeg_compression_bytes

PHOTOS = ("astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png")
BENCHMARK = (
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
)
N_IMAGES, N_SUBSETS = 3000, 70


def coco_sized(name: str) -> np.ndarray:
    image = Image.open(Path(skimage.data.__file__).parent / name).convert("RGB")
    size = (640, 480) if image.width >= image.height else (480, 640)
    return np.asarray(image.resize(size, Image.Resampling.LANCZOS))


def main() -> None:
    sizes: dict[str, list[int]] = {"png": [], "jpeg": []}
    per_corruption: dict[str, list[float]] = {}
    for k, name in enumerate(PHOTOS):
        image = coco_sized(name)
        for corruption in BENCHMARK:
            for severity in range(1, 6):
                if corruption == "jpeg_compression":
                    data = jpeg_compression_bytes(to_rgb(image), severity)
                    encoded = {"png": len(data), "jpeg": len(data)}
                else:
                    out = corrupt_item(image, corruption, severity, 0, k)
                    encoded = {f: len(store.encode_image(out, f, 95)) for f in sizes}
                for f, n in encoded.items():
                    sizes[f].append(n)
                per_corruption.setdefault(corruption, []).append(encoded["png"] / encoded["jpeg"])
    png, jpeg = np.mean(sizes["png"]), np.mean(sizes["jpeg"])
    print(f"{len(PHOTOS)} photos x {len(BENCHMARK)} corruptions x 5 severities, 640x480")
    print(
        f"mean bytes per corrupted image: PNG {png / 1024:.0f} KiB, JPEG q95 "
        f"{jpeg / 1024:.0f} KiB (PNG/JPEG = {png / jpeg:.1f}x)"
    )
    for fmt, mean in (("PNG", png), ("JPEG q95", jpeg)):
        total = mean * N_IMAGES * N_SUBSETS / 1e9
        print(f"{N_SUBSETS} subsets x {N_IMAGES} images as {fmt}: {total:.1f} GB")
    ratios = ", ".join(f"{c} {np.mean(r):.1f}x" for c, r in per_corruption.items())
    print(f"PNG/JPEG per corruption: {ratios}")


if __name__ == "__main__":
    main()

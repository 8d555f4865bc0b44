"""A corruption x severity grid of one image, to see what each corruption does."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vqarobust import corruptions, store
from vqarobust.corruptions.boxes import NEEDS as BOXES
from vqarobust.corruptions.stylize import Stylizer

GAP = 2  # pixels between cells
LABEL_WIDTH = 130  # row labels (corruption names)
HEADER_HEIGHT = 18  # column labels (clean, severity 1..5)


def preview_cells(
    image: np.ndarray,
    names: Sequence[str],
    seed: int = 0,
    image_id: int | None = None,
    stylizer: Stylizer | None = None,
) -> dict[tuple[str, int], np.ndarray]:
    """``{(corruption, severity): image}`` for severity 0 (clean) to each corruption's
    highest (at most 5). With ``image_id``, each cell is seeded as the workflow seeds that
    dataset image (global ``seed``, image id, corruption, severity), so it is the image
    the ``corrupt_images`` job stores (with the default border of the geometric
    corruptions: ``geometric.border`` is not applied here); without, every cell uses
    ``seed`` itself. A preview has no questions, so the box-aware corruptions
    (``object_crop``, ``occlude_context``) show what they do to an image without boxes:
    ``zoom_crop``'s and ``random_patches``' cells."""
    image = corruptions.to_rgb(image)
    out = {}
    for name in names:
        context: dict = {"stylizer": stylizer} if corruptions.needs_style_weights(name) else {}
        if corruptions.needs(name) == BOXES:
            context["boxes"] = None
        for s in range(min(corruptions.max_severity(name), 5) + 1):
            if image_id is None:
                out[name, s] = corruptions.corrupt(image, name, s, seed=seed, **context)
            elif s == 0:
                out[name, s] = image
            else:
                out[name, s] = corruptions.corrupt_item(image, name, s, seed, image_id, **context)
    return out


def preview_grid(
    image: np.ndarray,
    names: Sequence[str] | None = None,
    seed: int = 0,
    cell: int = 160,
    stylizer: Stylizer | None = None,
    image_id: int | None = None,
) -> Image.Image:
    """An RGB image: one row per corruption, labelled on the left; columns clean and
    severities 1..5, labelled on top; cells ``cell`` pixels on their longer side, tight.
    ``stylizer`` serves the stylize corruption; ``image_id``: :func:`preview_cells`."""
    names = list(names or corruptions.names(benchmark=True))
    cells = preview_cells(image, names, seed, image_id, stylizer)
    image = corruptions.to_rgb(image)
    h, w = image.shape[:2]
    scale = cell / max(h, w)
    cw, ch = max(1, round(w * scale)), max(1, round(h * scale))
    grid = Image.new(
        "RGB",
        (LABEL_WIDTH + 6 * (cw + GAP), HEADER_HEIGHT + len(names) * (ch + GAP)),
        "white",
    )
    draw = ImageDraw.Draw(grid)
    font = ImageFont.load_default()
    for s in range(6):
        label = "clean" if s == 0 else f"severity {s}"
        draw.text((LABEL_WIDTH + s * (cw + GAP) + 2, 3), label, fill="black", font=font)
    for r, name in enumerate(names):
        top = HEADER_HEIGHT + r * (ch + GAP)
        draw.text((4, top + ch // 2 - 6), name, fill="black", font=font)
        for s in range(min(corruptions.max_severity(name), 5) + 1):
            thumb = Image.fromarray(cells[name, s]).resize((cw, ch), Image.Resampling.LANCZOS)
            grid.paste(thumb, (LABEL_WIDTH + s * (cw + GAP), top))
    return grid


def write_preview(
    image_path: str | os.PathLike[str] | None,
    out_path: str | os.PathLike[str],
    names: Sequence[str] | None = None,
    seed: int = 0,
    stylize: Mapping[str, str] | None = None,
    images_dir: str | os.PathLike[str] | None = None,
    image_id: int | None = None,
) -> None:
    """Write the corruption grid of an image file, or of image ``image_id`` of a prepared
    shard folder (``images_dir``, seeded as the workflow seeds it), as an RGB PNG
    (atomically). ``stylize`` (``weights`` and ``styles`` folders) is needed when
    ``names`` has stylize."""
    if (image_path is None) == (images_dir is None):
        raise ValueError("give an image file or a prepared image folder with an image id")
    if images_dir is not None:
        if image_id is None:
            raise ValueError(f"{images_dir}: which image? give its id")
        image = read_dataset_image(images_dir, image_id)
    else:
        with Image.open(image_path) as im:
            image = np.asarray(im.convert("RGB"))
    styled = any(corruptions.needs_style_weights(n) for n in names or [])
    stylizer = Stylizer(**stylize) if stylize and styled else None
    grid = preview_grid(image, names, seed, stylizer=stylizer, image_id=image_id)
    with store.atomic_path(out_path) as tmp:
        grid.save(tmp, format="PNG")


def read_dataset_image(images_dir: str | os.PathLike[str], image_id: int) -> np.ndarray:
    """Image ``image_id`` of a prepared shard folder, decoded as the workflow decodes it."""
    shards = store.ImageShards(images_dir)
    if image_id not in shards:
        raise KeyError(
            f"{images_dir} holds no image {image_id}; it holds {len(shards)}, "
            f"e.g. {shards.ids()[:10]}"
        )
    return store.decode_image(shards.read([image_id])[image_id])

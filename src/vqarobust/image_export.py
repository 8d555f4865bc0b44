"""Write the images of a prepared or corrupted subset as files, to look at them or to
feed them to another harness: the bytes as stored (PNG or JPEG), one file per image."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from vqarobust import store

EXTENSIONS = {"png": "png", "jpeg": "jpg"}


def export_images(
    images_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    image_ids: Iterable[int] | None = None,
) -> int:
    """Write ``<image_id>.png|jpg`` for every image of the shard folder ``images_dir``
    (or only ``image_ids``) into ``out_dir``, all or nothing (the folder appears once
    every file is written; an existing ``out_dir`` must be empty). An unknown id is an
    error naming it. Returns the count."""
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        # The folder is swapped in whole: never over files someone else put there.
        raise FileExistsError(f"{out} exists and is not an empty folder")
    wanted = None if image_ids is None else set(image_ids)
    if wanted is not None:
        shards = store.ImageShards(images_dir)  # only to name unknown ids before writing
        unknown = sorted(i for i in wanted if i not in shards)
        if unknown:
            raise KeyError(
                f"{images_dir} holds no images {unknown[:10]}; it holds "
                f"{len(shards)}, e.g. {shards.ids()[:10]}"
            )
    n = 0
    with store.atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        for row in store.iter_images(images_dir):
            if wanted is not None and row["image_id"] not in wanted:
                continue
            ext = EXTENSIONS.get(row["format"])
            if ext is None:
                raise ValueError(f"image {row['image_id']}: unknown format {row['format']!r}")
            (Path(tmp) / f"{row['image_id']}.{ext}").write_bytes(row["bytes"])
            n += 1
    return n

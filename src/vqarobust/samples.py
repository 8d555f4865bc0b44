"""Seeded sample questions and thumbnails of their images on every image subset, for the
report's "how answers fail" grid. Stored in DuckDB (``sample_images``), since reports
read only the database."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

import polars as pl
from PIL import Image

from vqarobust import store
from vqarobust.report.outputs import N_ANSWER_GRIDS
from vqarobust.seeding import derive_seed

N_SAMPLES = N_ANSWER_GRIDS
THUMBNAIL = 112  # longest side, pixels

SAMPLE_SCHEMA = {
    "question_id": pl.Int64,
    "image_id": pl.Int64,
    "perturbation": pl.String,
    "severity": pl.Int16,
    "png": pl.Binary,
}


def sample_questions(questions: pl.DataFrame, seed: int, n: int = N_SAMPLES) -> pl.DataFrame:
    """``n`` questions, each about a different image, chosen by a per-question hash of
    (seed, question id): the choice does not depend on the order of the table."""
    ranked = questions.with_columns(
        pl.col("question_id")
        .map_elements(lambda q: derive_seed(seed, "sample", q), return_dtype=pl.Int64)
        .alias("_key")
    ).sort("_key")
    return ranked.unique("image_id", keep="first", maintain_order=True).head(n).drop("_key")


def thumbnail(data: bytes, size: int = THUMBNAIL, shown_as: tuple[int, int] | None = None) -> bytes:
    """A PNG of the image with its longest side at ``size`` (aspect kept). ``shown_as``
    (width, height): a smaller image (``low_resolution``'s) is first scaled up to it,
    nearest-neighbour so its pixels show, and its cell matches the clean image's."""
    with Image.open(io.BytesIO(data)) as im:
        im = im.convert("RGB")
        if shown_as is not None and im.size != tuple(shown_as):
            im = im.resize(tuple(shown_as), Image.Resampling.NEAREST)
        im.thumbnail((size, size), Image.Resampling.BILINEAR)
        buf = io.BytesIO()
        im.save(buf, format="PNG")
    return buf.getvalue()


def thumbnail_beside(data: bytes, clean: bytes, size: int = THUMBNAIL) -> bytes:
    """:func:`thumbnail` of a subset's image shown beside its clean image: one stored at
    another size (``low_resolution``'s) is first scaled to the clean image's size."""
    shown_as = store.image_info(clean)[1:]
    return thumbnail(data, size, shown_as if store.image_info(data)[1:] != shown_as else None)


def sample_images(
    samples: pl.DataFrame,
    subsets: Sequence[tuple[str, int, str | os.PathLike[str]]],
) -> pl.DataFrame:
    """Thumbnails of the sample questions' images in each (perturbation, severity, image
    folder) of ``subsets`` (the clean folder as ("clean", 0, ...)), each at its clean
    image's size (:func:`thumbnail_beside`)."""
    ids = samples["image_id"].to_list()
    rows: dict[str, list] = {k: [] for k in SAMPLE_SCHEMA}
    clean_folder = next((folder for p, _, folder in subsets if p == "clean"), None)
    clean = store.ImageShards(clean_folder).read(ids) if clean_folder is not None else {}
    for perturbation, severity, folder in subsets:
        images = store.ImageShards(folder).read(ids)
        for qid, iid in samples.select("question_id", "image_id").iter_rows():
            rows["question_id"].append(qid)
            rows["image_id"].append(iid)
            rows["perturbation"].append(perturbation)
            rows["severity"].append(severity)
            rows["png"].append(
                thumbnail_beside(images[iid], clean[iid])
                if iid in clean
                else thumbnail(images[iid])
            )
    return pl.DataFrame(rows, schema=SAMPLE_SCHEMA)

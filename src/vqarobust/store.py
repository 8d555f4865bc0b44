"""Parquet I/O: atomic writes, image shards sized by bytes, the table contracts.

Images travel inside Parquet as encoded bytes, one row per image, so a subset is a few
files rather than thousands. Every output is written under a temporary name and renamed
once complete, so a killed job never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGE_SCHEMA = pa.schema(
    [
        ("image_id", pa.int64()),
        ("bytes", pa.binary()),
        ("format", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
    ]
)

# Corrupted subsets also carry each image's quality against its clean image
# (vqarobust.metrics.image_quality), computed while both are in memory.
CORRUPTED_IMAGE_SCHEMA = IMAGE_SCHEMA.append(pa.field("ssim", pa.float64())).append(
    pa.field("psnr", pa.float64())
)

# A perturbation's level: 1-5 for corruptions, a swap index (objects x k, past int8 on
# GQA when every context object is swapped) for context perturbations.
SEVERITY = pa.int16()

# One attention map per (model, subset, question): the answer position's attention over
# the image on a rows x cols grid, row-major, summing to 1 (vqarobust.attention).
ATTENTION_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("perturbation", pa.string()),
        ("severity", SEVERITY),
        ("question_id", pa.int64()),
        ("image_id", pa.int64()),
        ("rows", pa.int16()),
        ("cols", pa.int16()),
        ("weights", pa.list_(pa.float32())),
    ]
)

QUESTION_SCHEMA = pa.schema(
    [
        ("question_id", pa.int64()),
        ("image_id", pa.int64()),
        ("question", pa.string()),
        ("answers", pa.list_(pa.string())),
        ("question_type", pa.string()),
        ("answer_type", pa.string()),
    ]
)

# One row per question of a perturbed question set (modality text or basic_question):
# the model is asked ``perturbed`` about the clean image. ``similarity`` and ``tries`` are
# set where the fidelity filter ran (null otherwise).
QUESTION_SET_SCHEMA = pa.schema(
    [
        ("question_id", pa.int64()),
        ("image_id", pa.int64()),
        ("original", pa.string()),
        ("perturbed", pa.string()),
        ("perturbation", pa.string()),
        ("severity", SEVERITY),
        ("changed", pa.bool_()),
        ("similarity", pa.float32()),
        ("tries", pa.int16()),
    ]
)

# ``truncated``: the model cut the question to its text-length limit. ``raw_answer``: the
# generated reply the answer was cut from (docs/models.md), null for a classifier's label.
# ``status``: answered, or why there is no answer (vqarobust.models.replies; ``answer``
# is then null); ``finish_reason``: the server's, where one sent it.
PREDICTION_SCHEMA = pa.schema(
    [
        ("question_id", pa.int64()),
        ("answer", pa.string()),
        ("raw_answer", pa.string()),
        ("model", pa.string()),
        ("modality", pa.string()),
        ("perturbation", pa.string()),
        ("severity", SEVERITY),
        ("truncated", pa.bool_()),
        ("status", pa.string()),
        ("finish_reason", pa.string()),
    ]
)

DEFAULT_SHARD_BYTES = 64 * 1024 * 1024

# The Parquet metadata key of a prediction file's input fingerprint (written by
# vqarobust.inference, read by vqarobust.provenance).
INPUTS_KEY = b"vqarobust.inputs"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary sibling path; rename it onto ``path`` only if the block succeeds.

    Works for files and directories. An existing ``path`` is replaced.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
        # On disk before the rename, so a crash leaves the old or the new, never a torn file.
        _fsync_tree(tmp)
        if target.is_dir() and not target.is_symlink() and tmp.is_dir():
            # Rename the old directory aside, the new one in, then delete the old one: at no
            # point is there neither (and a failed rename puts the old one back).
            _remove(old)
            os.replace(target, old)
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old, target)
                raise
            _fsync_dir(target.parent)
            _remove(old)
        else:
            os.replace(tmp, target)
            _fsync_dir(target.parent)
    finally:
        _remove(tmp)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    """fsync a file, or every file and folder of a directory tree (folders last)."""
    if path.is_symlink() or not path.exists():
        return
    if path.is_file():
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
        return
    for root, _, files in os.walk(path, topdown=False):
        for name in files:
            file = Path(root) / name
            if not file.is_symlink():
                with open(file, "rb") as fh:
                    os.fsync(fh.fileno())
        _fsync_dir(Path(root))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def write_table(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write one Parquet file atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


@dataclass(frozen=True)
class ImageStorage:
    """How a job stores the images it makes: ``image_format`` (png, or jpeg at
    ``jpeg_quality``; the config's ``storage`` keys) and the shard size, which changes
    files and never an image."""

    image_format: str = "png"
    jpeg_quality: int = 95
    shard_bytes: int = DEFAULT_SHARD_BYTES

    def encode(self, array: np.ndarray) -> bytes:
        """``array`` encoded as this storage's format."""
        return encode_image(array, self.image_format, self.jpeg_quality)


# Lossless PNG in shards of the default size.
DEFAULT_STORAGE = ImageStorage()


def encode_image(array: np.ndarray, fmt: str = "png", quality: int = 95) -> bytes:
    """Encode an HxWx3 uint8 array as PNG (lossless) or JPEG bytes."""
    buf = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(array, dtype=np.uint8))
    if fmt == "png":
        image.save(buf, format="PNG", compress_level=1)
    elif fmt == "jpeg":
        image.save(buf, format="JPEG", quality=quality)
    else:
        raise ValueError(f"unknown image format {fmt!r}; use 'png' or 'jpeg'")
    return buf.getvalue()


def decode_image(data: bytes) -> np.ndarray:
    """Decode encoded image bytes to an HxWx3 uint8 RGB array."""
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def image_info(data: bytes, verify: bool = False) -> tuple[str, int, int]:
    """(format, width, height) of encoded image bytes; ``verify`` decodes all pixels too."""
    with Image.open(io.BytesIO(data)) as im:
        if verify:
            im.load()
        return (im.format or "unknown").lower(), im.width, im.height


def image_format_of(data: bytes) -> str:
    """The lowercase format name PIL reads from encoded bytes ('png', 'jpeg', ...)."""
    return image_info(data)[0]


# Images per Parquet row group: inference reads only the row groups holding the images
# of its current chunk, so a row group is the unit of image I/O.
ROW_GROUP_IMAGES = 32


def write_image_shards(
    rows: Iterable[dict],
    out_dir: str | os.PathLike[str],
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    schema: pa.Schema = IMAGE_SCHEMA,
) -> int:
    """Write image rows (``schema`` fields: IMAGE_SCHEMA, or CORRUPTED_IMAGE_SCHEMA with
    quality scores) as ``shard-NNNNN.parquet`` files in ``out_dir``.

    Shards close once they hold ``shard_bytes`` of encoded images; row groups hold
    ``ROW_GROUP_IMAGES`` images. The directory is written atomically. Returns the number
    of images written.
    """
    if shard_bytes <= 0:
        raise ValueError(f"shard_bytes must be positive, got {shard_bytes}")
    n = 0
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        batch: list[dict] = []
        size = 0
        shard = 0

        def flush() -> None:
            nonlocal batch, size, shard
            if batch:
                table = pa.Table.from_pylist(batch, schema=schema)
                # Encoded images do not compress further; skip the codec's CPU time.
                pq.write_table(
                    table,
                    tmp / f"shard-{shard:05d}.parquet",
                    compression="none",
                    row_group_size=ROW_GROUP_IMAGES,
                )
                shard += 1
                batch, size = [], 0

        for row in rows:
            batch.append(row)
            size += len(row["bytes"])
            n += 1
            if size >= shard_bytes:
                flush()
        flush()
    return n


def image_shards(directory: str | os.PathLike[str]) -> list[Path]:
    """The shard files of an image directory, in order."""
    shards = sorted(Path(directory).glob("shard-*.parquet"))
    if not shards:
        raise FileNotFoundError(f"no image shards (shard-*.parquet) in {directory}")
    return shards


def count_images(directory: str | os.PathLike[str]) -> int:
    """How many images a shard directory holds, from the Parquet footers alone."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in image_shards(directory))


def iter_images(directory: str | os.PathLike[str]) -> Iterator[dict]:
    """Yield image rows (dicts with IMAGE_SCHEMA fields) from all shards of a directory."""
    for shard in image_shards(directory):
        pf = pq.ParquetFile(shard)
        for batch in pf.iter_batches(batch_size=256):
            yield from batch.to_pylist()


def read_image_quality(directory: str | os.PathLike[str]) -> pa.Table | None:
    """The (image_id, ssim, psnr) columns of a corrupted subset's shards; None for shards
    written without them (by a version before quality scores, or for clean images)."""
    shards = image_shards(directory)
    if not {"ssim", "psnr"} <= set(pq.read_schema(shards[0]).names):
        return None
    return pa.concat_tables(pq.read_table(s, columns=["image_id", "ssim", "psnr"]) for s in shards)


class ImageShards:
    """Random access by image id to the images of a shard directory.

    Only the ``image_id`` column is read up front; :meth:`read` then loads just the row
    groups that hold the requested images, so memory follows the request, not the subset.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._files = [pq.ParquetFile(p) for p in image_shards(directory)]
        self._where: dict[int, tuple[int, int]] = {}
        for s, pf in enumerate(self._files):
            for rg in range(pf.num_row_groups):
                ids = pf.read_row_group(rg, columns=["image_id"]).column(0).to_pylist()
                self._where.update((i, (s, rg)) for i in ids)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, image_id: object) -> bool:
        return image_id in self._where

    def ids(self) -> list[int]:
        """Every image id of the folder, sorted."""
        return sorted(self._where)

    def read(self, image_ids: Iterable[int]) -> dict[int, bytes]:
        """Encoded bytes of each requested image; unknown ids raise ``KeyError``."""
        wanted = set(image_ids)
        missing = sorted(i for i in wanted if i not in self._where)
        if missing:
            raise KeyError(f"{self.directory}: no images with ids {missing[:10]}")
        groups = sorted({self._where[i] for i in wanted})
        out: dict[int, bytes] = {}
        for s, rg in groups:
            t = self._files[s].read_row_group(rg, columns=["image_id", "bytes"])
            for i, data in zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True):
                if i in wanted:
                    out[i] = data
        return out


def read_questions(path: str | os.PathLike[str]) -> pa.Table:
    """Read a questions table and check it against the contract."""
    table = pq.read_table(path)
    missing = set(QUESTION_SCHEMA.names) - set(table.column_names)
    if missing:
        raise ValueError(f"{path}: questions table lacks columns {sorted(missing)}")
    return table.select(QUESTION_SCHEMA.names).cast(QUESTION_SCHEMA)

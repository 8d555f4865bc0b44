"""Where a dataset's image files come from: a folder, a zip archive, or explicit paths.

Each source maps an image id to the file's bytes, read as they are (clean images are
never re-encoded). Folders and archives are indexed by the number at the end of each
file name, which covers COCO's ``COCO_val2014_000000000042.jpg`` and 2017's
``000000000042.jpg`` alike.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

_IMAGE_NAME = re.compile(r"(\d+)\.(?:jpe?g|png)$", re.IGNORECASE)


class ImageSource:
    """Maps image ids to encoded bytes. ``read`` raises ``FileNotFoundError`` for unknown ids."""

    # False for a dataset read without images (:class:`NoImages`).
    has_files = True

    def ids(self) -> set[int]:
        """Every image id the source holds."""
        raise NotImplementedError

    def read(self, image_id: int) -> bytes:
        """The file's bytes, as stored."""
        raise NotImplementedError

    def describe(self, image_id: int) -> str:
        """Where the image lives, for messages."""
        raise NotImplementedError

    def close(self) -> None:
        """Release open files."""

    def __enter__(self) -> ImageSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _index_names(names: Iterable[str], where: str) -> dict[int, str]:
    index: dict[int, str] = {}
    for name in names:
        match = _IMAGE_NAME.search(PurePosixPath(name).name)
        if not match:
            continue
        image_id = int(match.group(1))
        if image_id in index:
            raise ValueError(
                f"{where}: two image files for id {image_id}: {index[image_id]} and {name}"
            )
        index[image_id] = name
    return index


class NoImages(ImageSource):
    """A dataset read without its images (only feature models can run on it): the
    prepared split then holds no image shards."""

    has_files = False

    def ids(self) -> set[int]:
        return set()

    def read(self, image_id: int) -> bytes:
        raise FileNotFoundError(f"image {image_id}: the dataset was read without images")

    def describe(self, image_id: int) -> str:
        return f"image {image_id} (no images given)"


class PathImages(ImageSource):
    """Explicit files: ``{image_id: path}``."""

    def __init__(self, paths: Mapping[int, str | os.PathLike[str]]) -> None:
        self._paths = {int(k): Path(v) for k, v in paths.items()}

    def ids(self) -> set[int]:
        return set(self._paths)

    def read(self, image_id: int) -> bytes:
        if image_id not in self._paths:
            raise FileNotFoundError(f"no image file for id {image_id}")
        return self._paths[image_id].read_bytes()

    def describe(self, image_id: int) -> str:
        return str(self._paths.get(image_id, f"image {image_id}"))


class FolderImages(PathImages):
    """Every ``*<digits>.jpg|jpeg|png`` file directly inside a folder."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"image folder {folder} does not exist")
        names = (e.name for e in os.scandir(folder) if e.is_file())
        index = _index_names(names, str(folder))
        super().__init__({i: folder / n for i, n in index.items()})


class ZipImages(ImageSource):
    """Images read straight from a zip archive (e.g. COCO's ``val2014.zip``), not extracted."""

    def __init__(self, archive: str | os.PathLike[str]) -> None:
        self.archive = Path(archive)
        self._zip = zipfile.ZipFile(self.archive)
        names = (i.filename for i in self._zip.infolist() if not i.is_dir())
        self._names = _index_names(names, str(self.archive))

    def ids(self) -> set[int]:
        return set(self._names)

    def read(self, image_id: int) -> bytes:
        if image_id not in self._names:
            raise FileNotFoundError(f"no image file for id {image_id} in {self.archive}")
        return self._zip.read(self._names[image_id])

    def describe(self, image_id: int) -> str:
        return f"{self.archive}:{self._names.get(image_id, image_id)}"

    def close(self) -> None:
        self._zip.close()


def open_images(location: str | os.PathLike[str]) -> ImageSource:
    """A folder or a ``.zip`` archive of images."""
    path = Path(location)
    if path.is_file() and zipfile.is_zipfile(path):
        return ZipImages(path)
    if path.is_dir():
        return FolderImages(path)
    if path.exists():
        raise ValueError(f"{path} is neither a folder of images nor a zip archive")
    raise FileNotFoundError(f"images not found: {path} (give a folder or a .zip archive)")

"""Random access to the inputs of a feature subset: clean rows, or rows with one swap."""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import pyarrow.parquet as pq

from vqarobust.context.feature_swaps import FeatureSwap, apply_swap
from vqarobust.features.table import FeatureTable, RegionFeatures

_SWAP_COLUMNS = [
    "image_id",
    "source_image_id",
    "perturbation",
    "rank",
    "object_index",
    "donor_image_id",
    "donor_object_index",
    "after_class",
    "after_attributes",
]


class FeatureReader:
    """Region features by image id, like :class:`vqarobust.store.ImageShards` for images.

    ``swaps_path`` (a table of ``FEATURE_SWAP_SCHEMA``) adds the swapped feature sets: an
    id of a swapped set reads its source image's rows with the swap made. The swap table
    stays columnar; a swap is built only when its set is read.
    """

    def __init__(
        self,
        features_path: str | os.PathLike[str],
        swaps_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.directory = str(features_path)
        self.table = FeatureTable.read(features_path)
        self._swaps = pq.read_table(swaps_path, columns=_SWAP_COLUMNS) if swaps_path else None
        ids = (
            np.asarray(self._swaps.column("image_id").to_numpy())
            if self._swaps is not None
            else np.zeros(0, np.int64)
        )
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]

    def _swap_row(self, image_id: int) -> int | None:
        at = int(np.searchsorted(self._sorted, image_id))
        if at < len(self._sorted) and self._sorted[at] == image_id:
            return int(self._order[at])
        return None

    def __contains__(self, image_id: object) -> bool:
        if not isinstance(image_id, (int, np.integer)):
            return False
        return image_id in self.table or self._swap_row(int(image_id)) is not None

    def _swap(self, row: int) -> tuple[int, FeatureSwap]:
        r = self._swaps.slice(row, 1).to_pylist()[0]
        donor = (
            None if r["donor_image_id"] is None else (r["donor_image_id"], r["donor_object_index"])
        )
        after = tuple(r["after_attributes"] or ())
        swap = FeatureSwap(
            r["perturbation"], r["rank"], r["object_index"], r["after_class"], after, donor
        )
        return r["source_image_id"], swap

    def read(self, image_ids: Iterable[int]) -> dict[int, RegionFeatures]:
        """The region features of each id; unknown ids raise ``KeyError``."""
        out = {}
        for i in set(image_ids):
            row = self._swap_row(int(i))
            if row is not None:
                source, swap = self._swap(row)
                out[i] = apply_swap(self.table, source, swap)
            elif i in self.table:
                out[i] = self.table.region_features(i)
            else:
                raise KeyError(f"{self.directory}: no features of image {i}")
        return out

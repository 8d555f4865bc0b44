"""Random access to the inputs of a feature subset: clean rows, or rows with one swap."""

from __future__ import annotations

import os
from collections.abc import Iterable

import pyarrow.parquet as pq

from vqarobust.context.feature_swaps import FeatureSwap, apply_swap
from vqarobust.features.table import FeatureTable, RegionFeatures


class FeatureReader:
    """Region features by image id, like :class:`vqarobust.store.ImageShards` for images.

    ``swaps_path`` (a table of ``FEATURE_SWAP_SCHEMA``) adds the swapped feature sets: an
    id of a swapped set reads its source image's rows with the swap made.
    """

    def __init__(
        self,
        features_path: str | os.PathLike[str],
        swaps_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.directory = str(features_path)
        self.table = FeatureTable.read(features_path)
        self.swaps: dict[int, tuple[int, FeatureSwap]] = {}
        if swaps_path is not None:
            rows = pq.read_table(swaps_path).to_pylist()
            for r in rows:
                donor = (None if r["donor_image_id"] is None
                         else (r["donor_image_id"], r["donor_object_index"]))  # fmt: skip
                after = tuple(r["after_attributes"] or ())
                swap = FeatureSwap(r["perturbation"], r["rank"], r["object_index"],
                                   r["after_class"], after, donor)  # fmt: skip
                self.swaps.setdefault(r["image_id"], (r["source_image_id"], swap))

    def __contains__(self, image_id: object) -> bool:
        return image_id in self.swaps or (isinstance(image_id, int) and image_id in self.table)

    def read(self, image_ids: Iterable[int]) -> dict[int, RegionFeatures]:
        """The region features of each id; unknown ids raise ``KeyError``."""
        out = {}
        for i in set(image_ids):
            if i in self.swaps:
                source, swap = self.swaps[i]
                out[i] = apply_swap(self.table, source, swap)
            elif i in self.table:
                out[i] = self.table.region_features(i)
            else:
                raise KeyError(f"{self.directory}: no features of image {i}")
        return out

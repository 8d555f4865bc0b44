"""Image quality of every corrupted subset (SSIM, PSNR and, with ``lpips`` set, LPIPS
against the clean image) and its rank correlation with each model's accuracy
(docs/metrics.md, "Image quality")."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vqarobust.analyses import robustness
from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table, quiet_warnings
from vqarobust.analyses.images import image_folders, subset_pairs
from vqarobust.metrics.image_quality import (
    quality_correlation,
    quality_table,
    read_quality,
    with_lpips,
)
from vqarobust.metrics.uncertainty import Settings as Bootstrap

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """The image subsets, which perturbations count (robustness's settings) and the
    bootstrap of the means' intervals (the ``uncertainty`` section, resolved)."""

    image_subsets: Sequence[Sequence]
    metrics: robustness.Settings
    bootstrap: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(
            subset_pairs(options.image_subsets),
            robustness.Settings.from_options(options),
            Bootstrap.resolved(options.uncertainty),
        )

    def __post_init__(self) -> None:
        if not isinstance(self.metrics, robustness.Settings):  # rebuilt from params
            object.__setattr__(self, "metrics", robustness.Settings(**self.metrics))


def run(inputs: Inputs, settings: Settings) -> Result:
    """Per-image scores, their means per subset, and the correlation with accuracy."""
    m = settings.metrics
    with quiet_warnings():  # the robustness analysis reports the gaps
        accuracy, _ = robustness.counted_rows(inputs.table("accuracy"), None, m)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        images = with_lpips(
            read_quality(image_folders(inputs, settings.image_subsets)), inputs.many("lpips")
        )
    for w in caught:
        log.warning("%s", w.message)
    quality = quality_table(images, Bootstrap.from_mapping(settings.bootstrap))
    counted = sorted(set(quality["perturbation"]) - {*m.controls, *m.outside})
    tables = {
        "image_quality_images": images,
        "image_quality": quality,
        "image_quality_correlation": quality_correlation(quality, accuracy, counted),
    }
    return Result(
        tables={k: Table(v, ordered=True) for k, v in tables.items()},
        warnings=[str(w.message) for w in caught],
    )


ANALYSIS = Analysis(
    name="image_quality",
    doc=__doc__,
    tables={
        "image_quality_images": "SSIM, PSNR (and LPIPS, with lpips set) of every corrupted image",
        "image_quality": "their means per corruption x severity",
        "image_quality_correlation": "Spearman's rho of quality and accuracy per model",
    },
    settings_type=Settings,
    run=run,
    requires=("accuracy",),
    inputs=("images", "lpips"),
)

"""The paired cluster bootstrap behind every interval: ``intervals``, model comparisons,
rank stability, drop tests and effective robustness (docs/metrics.md, "Uncertainty")."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vqarobust.analyses import robustness
from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table, quiet_warnings
from vqarobust.metrics.intervals import uncertainty_tables
from vqarobust.metrics.uncertainty import Settings as Bootstrap

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """The ``uncertainty`` section, and the robustness settings the resampled metrics use."""

    bootstrap: Mapping[str, Any]
    metrics: robustness.Settings

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(
            Bootstrap.resolved(options.uncertainty), robustness.Settings.from_options(options)
        )

    def __post_init__(self) -> None:
        if isinstance(self.metrics, Mapping):  # rebuilt from params
            object.__setattr__(self, "metrics", robustness.Settings(**self.metrics))


def run(inputs: Inputs, settings: Settings) -> Result:
    """Every resampled table, over the rows the robustness tables count."""
    bootstrap = Bootstrap.from_mapping(settings.bootstrap)
    m = settings.metrics
    with quiet_warnings():  # the robustness analysis reports the gaps
        _, scored = robustness.counted_rows(inputs.table("accuracy"), inputs.table("_scored"), m)
    started = time.perf_counter()
    tables = uncertainty_tables(
        scored,
        inputs.table("_questions"),
        bootstrap,
        m.ordered_weights,
        m.metric_families,
        m.controls,
        m.rscore_tolerance,
        m.rscore_maximum,
    )
    log.info(
        "uncertainty tables (%d resamples, cluster %s) in %.1f s",
        bootstrap.resamples,
        bootstrap.cluster,
        time.perf_counter() - started,
    )
    info = {"uncertainty": json.dumps(dataclasses.asdict(bootstrap))}
    return Result(tables={k: Table(v) for k, v in tables.items()}, info=info)


ANALYSIS = Analysis(
    name="uncertainty",
    doc=__doc__,
    tables={
        "intervals": "every statistic's bootstrap interval (metric, model, subset, key)",
        "model_comparisons": "paired differences between models, with intervals",
        "rank_stability": "share of resamples in which each model holds each rank",
        "drop_tests": "sign tests of clean vs perturbed accuracy, adjusted",
        "effective_robustness": "each model's distance from the fitted accuracy line",
    },
    settings_type=Settings,
    run=run,
    requires=("scoring", "accuracy"),
)

"""VRE and its sub-metrics per modality, MMI and R_score (docs/metrics.md), over the
perturbations that count: no controls, nothing kept outside the metrics (grayscale), and
only (model, subset) rows every model has."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from vqarobust.analyses.accuracy import controls_of, perturbation_accuracy
from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.metrics.coverage import check_coverage
from vqarobust.metrics.modalities import modality_tables
from vqarobust.metrics.robustness import softmax_weights
from vqarobust.metrics.rscore import DEFAULT_MAXIMUM, DEFAULT_TOLERANCE

log = logging.getLogger(__name__)

ACCURACY_KEYS = ("model", "modality", "perturbation", "severity")


@dataclass(frozen=True)
class Settings:
    """``vre.preferences`` (as weights), the perturbations' classes, the perturbations
    kept outside the metrics, ``rscore`` and what a gap is."""

    weights: Mapping[str, float] | None
    families: Mapping[str, str]
    outside: Sequence[str]
    rscore_tolerance: float
    rscore_maximum: float
    on_missing: str
    rankers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(
            dict(options.weights) if options.weights is not None else None,
            dict(options.families),
            sorted(set(options.outside)),
            options.rscore.get("tolerance", DEFAULT_TOLERANCE),
            options.rscore.get("maximum", DEFAULT_MAXIMUM),
            options.on_missing,
            dict(options.rankers),
        )

    @property
    def ordered_weights(self) -> dict[str, float] | None:
        """The weights in the sub-metrics' own order (params sort them by name)."""
        if self.weights is None:
            return None
        order = [name for name in softmax_weights() if name in self.weights]
        return {k: self.weights[k] for k in [*order, *sorted(set(self.weights) - set(order))]}

    @property
    def controls(self) -> list[str]:
        return controls_of(self.families)

    @property
    def metric_families(self) -> dict[str, str]:
        """The classes of the perturbations that count (no controls, none outside)."""
        leave = {*self.controls, *self.outside}
        return {p: f for p, f in self.families.items() if p not in leave}


def counted_rows(
    accuracy: pl.DataFrame, scored: pl.DataFrame | None, settings: Settings
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The accuracy rows (and scored predictions) the robustness metrics see: no controls,
    nothing outside, and (``on_missing: drop``) no gaps; the bootstrap sees exactly the
    rows the point tables do. A gap warns (:func:`check_coverage`)."""
    leave = [*settings.controls, *settings.outside]
    counted = perturbation_accuracy(accuracy).filter(~pl.col("perturbation").is_in(leave))
    if scored is not None:
        scored = scored.filter(~pl.col("perturbation").is_in(list(settings.outside)))
    kept = check_coverage(counted, settings.on_missing, "robustness tables")
    if kept.height < counted.height and scored is not None:
        gone = counted.join(kept, on=list(ACCURACY_KEYS), how="anti")
        no_model = set(counted["model"]) - set(kept["model"])
        scored = scored.filter(~pl.col("model").is_in(sorted(no_model))).join(
            gone.select(*ACCURACY_KEYS).with_columns(pl.col("severity").cast(pl.Int16)),
            on=list(ACCURACY_KEYS),
            how="anti",
        )
    return kept, scored


def with_ranking(table: pl.DataFrame, rankers: Mapping[str, str]) -> pl.DataFrame:
    """``table`` with a ``ranking`` column: how each basic-question perturbation was ranked
    (LASSO's mode and settings, BLEU's smoothing); null for the other rows."""
    ranking = pl.DataFrame(
        {"perturbation": list(rankers), "ranking": list(rankers.values())},
        schema={"perturbation": pl.String, "ranking": pl.String},
    )
    basic = pl.col("modality") == "basic_question"
    return table.join(ranking, on="perturbation", how="left", maintain_order="left").with_columns(
        pl.when(basic).then(pl.col("ranking")).alias("ranking")
    )


def run(inputs: Inputs, settings: Settings) -> Result:
    """The metric tables; gaps and dropped rows are reported as warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept, _ = counted_rows(inputs.table("accuracy"), None, settings)
        tables = modality_tables(
            kept,
            settings.ordered_weights,
            settings.metric_families,
            settings.rscore_tolerance,
            settings.rscore_maximum,
            settings.on_missing,
        )
    for w in caught:
        log.warning("%s", w.message)
    for name in ("rscore", "rscore_overall"):
        tables[name] = with_ranking(tables[name], settings.rankers)
    info = {
        "weights": json.dumps(settings.ordered_weights or "uniform"),
        "rscore": json.dumps(
            {"tolerance": settings.rscore_tolerance, "maximum": settings.rscore_maximum}
        ),
        "outside_metrics": json.dumps(list(settings.outside)),
    }
    return Result(
        tables={k: Table(v) for k, v in tables.items()},
        warnings=[str(w.message) for w in caught],
        info=info,
    )


ANALYSIS = Analysis(
    name="robustness",
    doc=__doc__,
    tables={
        "submetrics": "VRE's five sub-metrics per model x perturbation",
        "vre_model": "VRE per model and modality",
        "vre_perturbation": "VRE per perturbation (over the models)",
        "vre_family": "VRE, accuracy and relative drop per model x perturbation family",
        "vre_sweep": "VRE under other preference weights",
        "mmi": "MMI (relative drop) per model and modality",
        "rscore": "R_score per model x basic-question level",
        "rscore_overall": "R_score per model and ranker",
    },
    settings_type=Settings,
    run=run,
    requires=("accuracy",),
)

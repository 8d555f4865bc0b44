"""Costs: what each model x subset cost to answer (wall, CPU and GPU seconds, peak GPU
memory, a served model's requests, retries and tokens), read from the predictions files'
metadata, and money where the config gives prices (``prices``); the models' load times.
Changing a price reruns only this analysis, the DuckDB file and the report."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vqarobust.analyses.base import Analysis, Inputs, Result, RunOptions, Table
from vqarobust.costs import cost_rows, price

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """The config's ``prices`` (currency, per GPU-hour, per CPU-hour, per million tokens
    of each served model); empty: no money."""

    prices: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: RunOptions) -> Settings:
        return cls(dict(options.prices))


def run(inputs: Inputs, settings: Settings) -> Result:
    """The priced costs table and the load table; a warning counting the files whose
    costs are unknown (written before costs were recorded)."""
    paths = inputs.many("predictions")
    costs, loads, unknown = cost_rows(paths)
    result = Result(
        tables={
            "costs": Table(price(costs, settings.prices), ordered=True),
            "model_loads": Table(loads, ordered=True),
        }
    )
    if unknown:
        cells = costs.filter(~costs["known"]).height
        result.warnings.append(
            f"costs: {len(unknown)} of {len(paths)} prediction files record no costs "
            f"(written before costs were recorded), e.g. {unknown[0]}: their {cells} model x "
            "subset cells have unknown costs (null in table costs), left out of every sum"
        )
        log.warning("%s", result.warnings[-1])
    return result


ANALYSIS = Analysis(
    name="costs",
    doc=__doc__,
    tables={
        "costs": "per model x subset: questions, wall/CPU/GPU seconds, peak GPU memory, "
        "requests, retries, tokens, money",
        "model_loads": "per predictions file: the model's load time in the job that wrote it",
    },
    settings_type=Settings,
    run=run,
    inputs=("predictions",),
)

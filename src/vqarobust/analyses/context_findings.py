"""The SwapMix paper's findings in words: perfect sight vs detector features, SwapMix vs
plain training, each with the paired interval of the difference (docs/context.md)."""

from __future__ import annotations

from vqarobust.analyses.base import Analysis, Inputs, NoSettings, Result, Table
from vqarobust.metrics.context_paper import context_findings


def run(inputs: Inputs, settings: NoSettings) -> Result:
    """One row per finding the configured models allow."""
    del settings
    findings = context_findings(
        inputs.table("model_inputs"),
        inputs.table("context_reliance"),
        inputs.table("model_comparisons"),
    )
    return Result(tables={"context_findings": Table(findings)})


ANALYSIS = Analysis(
    name="context_findings",
    doc=__doc__,
    tables={"context_findings": "each finding: the two models, their reliance, the interval"},
    settings_type=NoSettings,
    run=run,
    requires=("context", "uncertainty"),
    active=lambda options: options.models is not None,
)

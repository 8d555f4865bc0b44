"""The registry of analyses: every family of results tables, in an order where each
comes after the analyses it reads (docs/architecture.md says how to add one)."""

from __future__ import annotations

from collections.abc import Iterable

from vqarobust.analyses import (  # noqa: I001
    accuracy,
    attention,
    colour_bias,
    context,
    context_at_k,
    context_findings,
    image_quality,
    mispredictions,
    model_cards,
    robustness,
    samples,
    scoring,
    uncertainty,
    vqabq,
)
from vqarobust.analyses.base import Analysis, RunOptions

ANALYSES: dict[str, Analysis] = {
    a.name: a
    for a in (
        scoring.ANALYSIS,
        accuracy.ANALYSIS,
        robustness.ANALYSIS,
        uncertainty.ANALYSIS,
        image_quality.ANALYSIS,
        samples.ANALYSIS,
        mispredictions.ANALYSIS,
        colour_bias.ANALYSIS,
        attention.ANALYSIS,
        vqabq.ANALYSIS,
        context.ANALYSIS,
        context_at_k.ANALYSIS,
        context_findings.ANALYSIS,
        model_cards.ANALYSIS,
    )
}


def get(name: str) -> Analysis:
    """The registered analysis ``name``."""
    try:
        return ANALYSES[name]
    except KeyError:
        raise KeyError(f"unknown analysis {name!r}; known: {sorted(ANALYSES)}") from None


def active(options: RunOptions) -> list[Analysis]:
    """The analyses a run with these options makes, in registry order."""
    return [a for a in ANALYSES.values() if a.active(options)]


def affected(
    options: RunOptions, groups: Iterable[str] = (), changed: Iterable[str] = ()
) -> list[str]:
    """The active analyses that rerun when the files of ``groups`` (workflow input
    groups such as ``predictions``) or the analyses ``changed`` change: those reading
    them, and every analysis that reads one of those, transitively."""
    groups, hit = set(groups), set(changed)
    for a in active(options):
        if hit & set(a.requires) or groups & set(a.inputs):
            hit.add(a.name)
    return [a.name for a in active(options) if a.name in hit]


def _check_order() -> None:
    seen: set[str] = set()
    for a in ANALYSES.values():
        missing = set(a.requires) - seen
        if missing:
            raise RuntimeError(f"analysis {a.name} is registered before {sorted(missing)}")
        seen.add(a.name)


_check_order()

__all__ = ["ANALYSES", "Analysis", "RunOptions", "active", "affected", "get"]

"""The registry of analyses: every family of results tables, in an order where each
comes after the analyses it reads (docs/architecture.md says how to add one; a plugin
adds one with :func:`register`, docs/extending.md)."""

from __future__ import annotations

from collections.abc import Iterable

from vqarobust.analyses import (  # noqa: I001
    accuracy,
    attention,
    colour_bias,
    context,
    context_at_k,
    context_findings,
    costs,
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
from vqarobust.registry import RegistryClash, describe_origin

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
        costs.ANALYSIS,
    )
}


def register(analysis: Analysis) -> Analysis:
    """Add a plugin's analysis after those registered so far (so after every analysis it
    may require). A name taken by another analysis, or a table name another analysis
    writes, is an error naming both; so is a required analysis not registered yet."""
    if analysis.name in ANALYSES:
        other = ANALYSES[analysis.name]
        raise RegistryClash(
            f"analysis {analysis.name!r} of {describe_origin(analysis.module)} "
            f"clashes with the one of {describe_origin(other.module)}"
        )
    for other in ANALYSES.values():
        shared = sorted(set(analysis.tables) & set(other.tables))
        if shared:
            raise RegistryClash(
                f"analysis {analysis.name!r} of {describe_origin(analysis.module)} writes "
                f"table {shared[0]!r}, as analysis {other.name!r} of "
                f"{describe_origin(other.module)} does"
            )
    missing = sorted(set(analysis.requires) - set(ANALYSES))
    if missing:
        raise ValueError(
            f"analysis {analysis.name!r} requires {missing}, which no analysis "
            f"registered before it is; known: {sorted(ANALYSES)}"
        )
    ANALYSES[analysis.name] = analysis
    return analysis


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

__all__ = ["ANALYSES", "Analysis", "RunOptions", "active", "affected", "get", "register"]

"""The registry of analyses: every family of results tables, in an order where each
comes after the analyses it reads (docs/architecture.md says how to add one; a plugin
adds one with :func:`register`, docs/extending.md)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping

from vqarobust.analyses.base import Analysis, RunOptions
from vqarobust.registry import RegistryClash, describe_origin

# The built-in analyses, each named as its module, in an order where each comes after
# those it requires (a test holds the order).
BUILT_IN = (
    "scoring",
    "accuracy",
    "robustness",
    "uncertainty",
    "image_quality",
    "samples",
    "mispredictions",
    "colour_bias",
    "attention",
    "vqabq",
    "context",
    "context_at_k",
    "context_findings",
    "model_cards",
    "costs",
)


class AnalysisTable(Mapping[str, Analysis]):
    """Analyses by name, in registry order, each module imported when its analysis is
    first asked for: an analysis job then imports its own analysis and what that reads,
    not every analysis's libraries (about half a second of each job's start)."""

    def __init__(self, modules: Mapping[str, str]) -> None:
        self._modules = dict(modules)
        self._loaded: dict[str, Analysis] = {}

    def __getitem__(self, name: str) -> Analysis:
        if name not in self._loaded:
            analysis = importlib.import_module(self._modules[name]).ANALYSIS
            if analysis.name != name:
                raise RuntimeError(f"module {self._modules[name]} defines {analysis.name!r}")
            self._loaded[name] = analysis
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def add(self, analysis: Analysis) -> None:
        """Append an analysis already imported (a plugin's)."""
        self._modules[analysis.name] = analysis.module
        self._loaded[analysis.name] = analysis


ANALYSES = AnalysisTable({name: f"vqarobust.analyses.{name}" for name in BUILT_IN})


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
    ANALYSES.add(analysis)
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


def check_order() -> None:
    """Fail where an analysis comes before one it requires (imports every analysis)."""
    seen: set[str] = set()
    for a in ANALYSES.values():
        missing = set(a.requires) - seen
        if missing:
            raise RuntimeError(f"analysis {a.name} is registered before {sorted(missing)}")
        seen.add(a.name)


__all__ = [
    "ANALYSES",
    "Analysis",
    "AnalysisTable",
    "RunOptions",
    "active",
    "affected",
    "check_order",
    "get",
    "register",
]

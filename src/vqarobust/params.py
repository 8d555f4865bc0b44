"""What a Snakemake job is told through ``params``, and what it is not.

Snakemake reruns a job when the ``repr`` of one of its params changes. So params hold
only settings that can change the job's output, in a canonical form (mapping keys
sorted at every level): reordering the keys of a config mapping reruns nothing.
Settings that change only how fast or where a job runs (batch size, memory hints,
scheduler limits) reach the script from the config instead (:func:`runtime_options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NoRerun:
    """A setting that changes no output: why, and the test that shows it."""

    reason: str
    test: str


def canonical(value: Any) -> Any:
    """``value`` with every mapping's keys sorted (recursively); lists keep their order."""
    if isinstance(value, Mapping):
        return {k: canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def answer_spec(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a model entry that can change its answers, canonical: every key but
    those its family declares runtime-only (:mod:`vqarobust.models.keys`) and ``train``
    (the trained checkpoint stands for it). (How replies are cut to short answers is
    code: the family's code digest covers it.)"""
    from vqarobust.models import entry_keys
    from vqarobust.models.keys import Keyed

    keys = entry_keys(entry.get("family"))
    skip = {*keys.runtime, *keys.hints, "train"}
    spec = {k: v for k, v in entry.items() if k not in skip}
    for key, how in keys.runtime.items():
        if isinstance(how, Keyed) and key in entry:
            spec[how.into] = how.by(entry[key])
    return canonical(spec)


def runtime_options(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The adapter options of a model entry that do not change answers (its family's
    ``runtime`` keys)."""
    from vqarobust.models import entry_keys

    runtime = entry_keys(entry.get("family")).runtime
    return {k: v for k, v in entry.items() if k in runtime}

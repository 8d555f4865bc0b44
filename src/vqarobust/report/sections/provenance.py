"""The "Provenance" section: the ``provenance.*`` keys of ``run_info`` (code,
environment, config, data and weights by digest; ``vqarobust provenance`` prints the
same)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from vqarobust.provenance import PREFIX
from vqarobust.report.sections.base import Data, Run, Section


def context(data: Data, run: Run) -> pl.DataFrame | None:
    """The (key, value) table; None for a database written before provenance was
    recorded (the partial says so)."""
    del data
    rows = [
        (k.removeprefix(PREFIX), readable(v)) for k, v in run.info.items() if k.startswith(PREFIX)
    ]
    if not rows:
        return None
    return pl.DataFrame(rows, schema=["key", "value"], orient="row")


def readable(value: str | None) -> str:
    """A run_info value as a reader reads it: a JSON list, mapping or null (how
    :mod:`vqarobust.provenance` stores what is not text) in words, text as it is."""
    try:
        parsed = json.loads(value) if value is not None else None
    except ValueError:
        return value or ""
    return _words(parsed)


def _words(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_words(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_words(v)}" for k, v in value.items())
    return str(value)


SECTION = Section("provenance", (), context)

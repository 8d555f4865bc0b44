"""The "Provenance" section: the ``provenance.*`` keys of ``run_info`` (code,
environment, config, data and weights by digest; ``vqarobust provenance`` prints the
same)."""

from __future__ import annotations

import polars as pl

from vqarobust.provenance import PREFIX
from vqarobust.report.sections.base import Data, Run, Section


def context(data: Data, run: Run) -> pl.DataFrame | None:
    """The (key, value) table; None for a database written before provenance was
    recorded (the partial says so)."""
    del data
    rows = [(k.removeprefix(PREFIX), v) for k, v in run.info.items() if k.startswith(PREFIX)]
    if not rows:
        return None
    return pl.DataFrame(rows, schema=["key", "value"], orient="row")


SECTION = Section("provenance", (), context)

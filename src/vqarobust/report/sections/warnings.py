"""The "Warnings" section: the sentences the analyses left in ``run_info.warnings``
(degenerate metric inputs, dropped gaps, skips)."""

from __future__ import annotations

import json

import duckdb

from vqarobust.report.sections.base import Data, Run, Section


def context(data: Data, run: Run) -> list[str]:
    """Every warning, in the order the analyses recorded them."""
    del data
    return json.loads(run.info.get("warnings", "[]"))


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """The perturbations the run skipped, with the reason."""
    skipped = con.sql("SELECT * FROM skipped_perturbations ORDER BY perturbation").pl()
    return {"skipped": skipped}


SECTION = Section("warnings", (), context, summary=summary)

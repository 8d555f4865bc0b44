"""The "Warnings" section: the sentences the analyses left in ``run_info.warnings``
(degenerate metric inputs, dropped gaps, skips), and the versions that differ from the
checkout's lock (``provenance.lock``)."""

from __future__ import annotations

import json

import duckdb

from vqarobust.environment import lock_sentence
from vqarobust.provenance import PREFIX
from vqarobust.report.sections.base import Data, Run, Section


def context(data: Data, run: Run) -> list[str]:
    """Every warning, in the order the analyses recorded them, then the lock's."""
    del data
    out = json.loads(run.info.get("warnings", "[]"))
    return out + ([run.summary.environment] if run.summary.environment else [])


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """The perturbations the run skipped, with the reason, and the warning when package
    versions differ from the lock."""
    skipped = con.sql("SELECT * FROM skipped_perturbations ORDER BY perturbation").pl()
    lock = con.execute("SELECT value FROM run_info WHERE key = ?", [PREFIX + "lock"]).fetchone()
    return {"skipped": skipped, "environment": lock_sentence(json.loads(lock[0])) if lock else None}


SECTION = Section("warnings", (), context, summary=summary)

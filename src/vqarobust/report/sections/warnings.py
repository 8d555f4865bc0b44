"""The "Warnings" section: the sentences the analyses left in ``run_info.warnings``
(degenerate metric inputs, dropped gaps, skips), and the versions that differ from the
checkout's lock (``provenance.lock``)."""

from __future__ import annotations

import json

import duckdb

from vqarobust.environment import lock_sentence
from vqarobust.metrics.answer_status import flagged_cells
from vqarobust.provenance import PREFIX
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import table_names


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
    flagged = (
        con.sql("SELECT * FROM answer_status WHERE flagged").pl()
        if "answer_status" in table_names(con)
        else None
    )
    unanswered = (
        f"Cells with requests left without the model's answer (out of every metric): "
        f"{flagged_cells(flagged)}."
        if flagged is not None and flagged.height
        else None
    )
    return {
        "skipped": skipped,
        "environment": lock_sentence(json.loads(lock[0])) if lock else None,
        "unanswered": unanswered,
    }


SECTION = Section("warnings", (), context, summary=summary)

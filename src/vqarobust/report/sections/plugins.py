"""The "Plugin analyses" section: each analysis a plugin registered (docs/extending.md),
its description and its tables as the results file holds them (the first rows of each;
every row is in DuckDB). They are not written as CSV: the workflow declares the report's
files (:mod:`vqarobust.report.outputs`) for every run alike."""

from __future__ import annotations

import duckdb

from vqarobust.analyses.registry import ANALYSES, BUILT_IN
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.sql import identifier

ROWS = 50  # rows of each table shown on the page


def plugin_analyses() -> list:
    """The registered analyses that are not built in, in registry order (the built-in
    ones stay unimported: a plugin cannot take their names)."""
    return [ANALYSES[name] for name in ANALYSES if name not in BUILT_IN]


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """Per plugin analysis with a table in the results file: its description and the
    first :data:`ROWS` rows of each of its tables, with their row counts."""
    del run
    present = {r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()}
    out = []
    for analysis in plugin_analyses():
        tables = []
        for name, doc in analysis.tables.items():
            if name not in present:
                continue
            # A plugin names its tables: quoted, never pasted.
            rows = con.sql(f"SELECT count(*) FROM {identifier(name)}").fetchall()[0][0]
            head = con.sql(f"SELECT * FROM {identifier(name)} LIMIT {ROWS}").pl()
            tables.append({"name": name, "doc": doc, "rows": rows, "frame": head})
        if tables:
            out.append({"name": analysis.name, "doc": analysis.doc, "tables": tables})
    return {"analyses": out}


def context(data: Data, run: Run) -> list[dict] | None:
    """The plugin analyses with tables; None (no section) where there are none."""
    del run
    return data["analyses"] or None


SECTION = Section("plugins", (), context, read=read)

"""Compare two DuckDB results files table by table, row for row.

    .venv/bin/python benchmarks/compare_duckdb.py BEFORE.duckdb AFTER.duckdb

A table is equal when both files have it with the same column names and types and the
same multiset of rows (``EXCEPT ALL`` both ways is empty; row order is not compared:
tables are read through their keys); a type change with the same values is reported as
such and not counted equal. ``run_info`` is compared key by key, leaving out
the keys that describe when and from which checkout the file was written
(``provenance.finished``, ``provenance.started``, ``provenance.git_commit``,
``provenance.git_dirty``); the tables of measured times (``vqarobust.costs.MEASURED_TABLES``)
are not compared. Prints one line per table and ``N of M tables equal``; exits 1 when any
differs.
"""

from __future__ import annotations

import argparse
import sys

import duckdb

from vqarobust.costs import MEASURED_TABLES

VOLATILE = (
    "provenance.finished",
    "provenance.started",
    "provenance.git_commit",
    "provenance.git_dirty",
)


def _tables(con: duckdb.DuckDBPyConnection, alias: str) -> dict[str, list[tuple[str, str]]]:
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = ? ORDER BY table_name, column_index",
        [alias],
    ).fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append((column, kind))
    return tables


def _rows_differ(con: duckdb.DuckDBPyConnection, table: str) -> int:
    a, b = f'a."{table}"', f'b."{table}"'
    n = 0
    for x, y in ((a, b), (b, a)):
        n += con.execute(
            f"SELECT count(*) FROM (SELECT * FROM {x} EXCEPT ALL SELECT * FROM {y})"
        ).fetchone()[0]
    return n


def _run_info(con: duckdb.DuckDBPyConnection) -> list[str]:
    diffs = con.execute(
        "SELECT coalesce(x.key, y.key), x.value, y.value FROM a.run_info x "
        "FULL JOIN b.run_info y USING (key) WHERE x.value IS DISTINCT FROM y.value "
        "ORDER BY 1"
    ).fetchall()
    return [f"{k}: {v1!r} -> {v2!r}" for k, v1, v2 in diffs if k not in VOLATILE]


def compare(before: str, after: str) -> tuple[int, int, list[str]]:
    """(equal tables, tables in either file, one line per table)."""
    con = duckdb.connect()
    con.execute(f"ATTACH '{before}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{after}' AS b (READ_ONLY)")
    ta, tb = _tables(con, "a"), _tables(con, "b")
    lines, equal = [], 0
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            lines.append(f"{name}: only in {'before' if name in ta else 'after'}")
        elif [c for c, _ in ta[name]] != [c for c, _ in tb[name]]:
            lines.append(f"{name}: columns differ: {ta[name]} vs {tb[name]}")
        elif name in MEASURED_TABLES:
            lines.append(f"{name}: not compared (measured times)")
            equal += 1
        elif name == "run_info":
            diffs = _run_info(con)
            equal += not diffs
            lines.append("run_info: equal" if not diffs else "run_info: " + "; ".join(diffs))
        else:
            n = _rows_differ(con, name)
            types = [
                f"{c} {x} -> {y}"
                for (c, x), (_, y) in zip(ta[name], tb[name], strict=True)
                if x != y
            ]
            equal += n == 0 and not types
            note = f" (same values; column types differ: {', '.join(types)})" if types else ""
            lines.append(f"{name}: {'equal' if n == 0 else f'{n} rows differ'}{note}")
    return equal, len(set(ta) | set(tb)), lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    equal, total, lines = compare(args.before, args.after)
    print("\n".join(lines))
    print(f"{equal} of {total} tables equal")
    sys.exit(0 if equal == total else 1)


if __name__ == "__main__":
    main()

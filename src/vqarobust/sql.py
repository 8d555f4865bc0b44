"""SQL text built from names the package reads out of files (a DuckDB file's tables, a
results folder's Parquet files, a plugin's table names): quoted, never pasted as they
are, so a name holding a quote, a space or SQL stays one name."""

from __future__ import annotations


def identifier(name: str) -> str:
    """``name`` as a DuckDB identifier: in double quotes, each inner double quote doubled
    (a table ``a"b c`` is ``"a""b c"``)."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as a DuckDB string literal: in single quotes, each inner one doubled."""
    return "'" + text.replace("'", "''") + "'"

"""CSV for spreadsheets: a text cell that a spreadsheet would read as a formula is
escaped (OWASP, "CSV Injection").

A model's raw reply, a perturbed question or a plugin's table is text the package does
not control; a cell such as ``=HYPERLINK(...)`` or ``@SUM(...)`` would run when the CSV
is opened in a spreadsheet. Every text cell that starts with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return gets a leading single quote, which spreadsheets show as text;
numeric, boolean and null cells are written as they are.
"""

from __future__ import annotations

import os

import polars as pl

# The first characters that make a spreadsheet read a cell as a formula.
FORMULA_START = r"^[=+\-@\t\r]"


def escape_formulas(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each text cell that starts a formula prefixed by ``'``; other
    columns unchanged."""
    text = [
        name
        for name, dtype in frame.schema.items()
        if dtype == pl.String or isinstance(dtype, pl.Categorical | pl.Enum)
    ]
    return frame.with_columns(
        pl.when(pl.col(name).cast(pl.String).str.contains(FORMULA_START))
        .then(pl.concat_str(pl.lit("'"), pl.col(name).cast(pl.String)))
        .otherwise(pl.col(name).cast(pl.String))
        .alias(name)
        for name in text
    )


def write_csv(frame: pl.DataFrame, path: str | os.PathLike[str]) -> None:
    """``frame`` as CSV at ``path``, its formula cells escaped (:func:`escape_formulas`)."""
    escape_formulas(frame).write_csv(path)

"""The shape of a report section: what it reads from the results file, the figures and
CSV tables it writes, and the data its Jinja2 partial receives.

A section (docs/architecture.md) is one module of this package with one :class:`Section`
object; :data:`vqarobust.report.sections.SECTIONS` lists them in page order and
:func:`vqarobust.report.html.render_report` is a loop over that list. Every SQL query of
the report lives in a section's ``read``; its partial
(``templates/sections/<name>.html.j2``) only lays out what ``context`` gives it, under
the section's name.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.summary import Summary

Data = dict[str, Any]


@dataclass(frozen=True)
class Run:
    """What several sections read: the headline numbers, ``run_info``, and each image
    corruption's class (ordered as the VRE-per-perturbation table, strongest first)."""

    summary: Summary
    info: dict[str, str]
    families: dict[str, str]

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, summary: Summary) -> Run:
        """The shared facts of the results file behind ``con``."""
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        families = con.execute(
            "SELECT perturbation, family FROM vre_perturbation WHERE modality = 'image' "
            "ORDER BY vre DESC"
        ).fetchall()
        return cls(summary, info, dict(families))


def _no_figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    del data, run
    return {}


def _no_tables(data: Data) -> dict[str, pl.DataFrame]:
    del data
    return {}


def _no_data(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    del con, run
    return {}


def _no_summary(con: duckdb.DuckDBPyConnection) -> Data:
    del con
    return {}


@dataclass(frozen=True)
class Section:
    """One section of the report page.

    ``name`` is its block in ``report.html.j2``, its partial's file name and the name its
    data has in the page. ``analyses`` are the registered analyses whose tables it shows.
    ``read`` runs every query it needs; ``context`` turns that into the partial's data
    (None leaves the section out of the page); ``figures`` draws the figures it declares
    in :data:`vqarobust.report.outputs.FIGURES` (drawn, as placeholders, even when the
    section is left out: the workflow declares every file); ``tables`` gives the frames
    written as ``tables/<name>.csv``; ``summary`` reads the
    :class:`~vqarobust.summary.Summary` fields its tables give (``vqarobust summary`` and
    the page's opening)."""

    name: str
    analyses: tuple[str, ...]
    context: Callable[[Data, Run], Any]
    read: Callable[[duckdb.DuckDBPyConnection, Run], Data] = _no_data
    figures: Callable[[Data, Run], dict[str, matplotlib.figure.Figure]] = _no_figures
    tables: Callable[[Data], dict[str, pl.DataFrame]] = _no_tables
    summary: Callable[[duckdb.DuckDBPyConnection], Data] = _no_summary

    @property
    def template(self) -> str:
        """The partial's path under the report's templates."""
        return f"sections/{self.name}.html.j2"


def b64(png: bytes) -> str:
    """PNG bytes as the base64 text an ``<img src="data:...">`` embeds."""
    return base64.b64encode(png).decode("ascii")

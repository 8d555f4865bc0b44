"""Render the self-contained HTML report from the DuckDB results file.

The report reads only the DuckDB file. ``index.html`` embeds its figures (base64 PNG),
so it opens offline on its own; every figure is also written beside it as PNG and SVG
(for papers), every table as CSV, and the VRE tables as LaTeX (booktabs). The page is a
loop over :data:`vqarobust.report.sections.SECTIONS`: each section reads its tables,
draws its figures and hands its partial its data. Figure captions live in
``captions/*.rst`` (package data), shared with Snakemake's native report.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import matplotlib.figure
import matplotlib.pyplot as plt
import polars as pl

from vqarobust import store
from vqarobust.report.outputs import FIGURES, LATEX_TABLES, TABLES
from vqarobust.report.sections import SECTIONS, Run, Section
from vqarobust.report.sections.base import b64
from vqarobust.spreadsheets import write_csv
from vqarobust.summary import summarize

CAPTIONS = Path(__file__).resolve().parent / "captions"


def caption(name: str) -> str:
    """The one-line caption of a figure (shared with the native Snakemake report)."""
    return (CAPTIONS / f"{name}.rst").read_text(encoding="utf-8").strip()


def cells(df: pl.DataFrame, digits: int = 3) -> list[list[tuple[str, str]]]:
    """The rows of ``df`` as (text, kind) cells for the template's ``table`` macro: kind
    ``number`` (right-aligned; floats to ``digits`` places), ``text`` (reads from the
    left) or ``empty`` (None: not applicable, e.g. a one-level corruption at severity 2)."""

    def cell(v: object) -> tuple[str, str]:
        if v is None:
            return "", "empty"
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return (f"{v:.{digits}f}" if isinstance(v, float) else str(v)), "number"
        return str(v), "text"

    return [[cell(v) for v in row] for row in df.iter_rows()]


PNG_DPI = 110  # the page's figures

ROW_END = " " + "\\" * 2  # LaTeX's row separator, two backslashes


def _latex(df: pl.DataFrame, digits: int = 3) -> str:
    """A booktabs table (no \\usepackage line; ``\\usepackage{booktabs}`` in the paper)."""

    def cell(v: object) -> str:
        text = f"{v:.{digits}f}" if isinstance(v, float) else str(v)
        return text.replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")

    lines = [
        r"\begin{tabular}{l" + "r" * (df.width - 1) + "}",
        r"\toprule",
        " & ".join(cell(c) for c in df.columns) + ROW_END,
        r"\midrule",
    ]
    lines += [" & ".join(cell(v) for v in row) + ROW_END for row in df.iter_rows()]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _save(figure: plt.Figure, folder: Path, name: str) -> str:
    """Write PNG and SVG; return the PNG as base64 for embedding."""
    # The tight box once for both files: ``bbox_inches="tight"`` lays the figure out
    # again for each (a third of a report's drawing time). Laid out at the PNG's
    # resolution, the box is the one "tight" finds for the PNG.
    figure.set_dpi(PNG_DPI)
    figure.draw_without_rendering()
    box = figure.get_tightbbox().padded(plt.rcParams["savefig.pad_inches"])
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches=box)
    svg = io.StringIO()
    figure.savefig(svg, format="svg", bbox_inches=box)
    plt.close(figure)
    with store.atomic_path(folder / f"{name}.png") as tmp:
        tmp.write_bytes(buf.getvalue())
    with store.atomic_path(folder / f"{name}.svg") as tmp:
        tmp.write_text(svg.getvalue(), encoding="utf-8")
    return b64(buf.getvalue())


def _declared(made: Mapping[str, Any], declared: tuple[str, ...], what: str) -> None:
    """The sections together make exactly the files the workflow declares."""
    if set(made) != set(declared):
        raise RuntimeError(
            f"the report's sections make {what} {sorted(set(made) - set(declared))} that "
            f"report.outputs does not declare, and not {sorted(set(declared) - set(made))}"
        )


def _write_tables(frames: Mapping[str, pl.DataFrame], folder: Path) -> None:
    """Every report table as CSV, the VRE and MMI tables also as LaTeX."""
    _declared(frames, TABLES, "tables")
    for name in TABLES:
        with store.atomic_path(folder / f"{name}.csv") as tmp:
            write_csv(frames[name], tmp)
    for name in LATEX_TABLES:
        with store.atomic_path(folder / f"{name}.tex") as tmp:
            tmp.write_text(_latex(frames[name].drop("family", strict=False)), encoding="utf-8")


def _embed(made: Mapping[str, matplotlib.figure.Figure], folder: Path) -> dict[str, Any]:
    """Save every figure as PNG and SVG; the page's figures with their captions."""
    _declared(made, FIGURES, "figures")
    return {
        name: {"png": _save(made[name], folder, name), "caption": caption(name)} for name in FIGURES
    }


def _one_each(parts: list[Mapping[str, Any]], what: str) -> dict[str, Any]:
    """The parts merged; a name two sections make is an error, not an overwrite."""
    out: dict[str, Any] = {}
    for part in parts:
        twice = set(out) & set(part)
        if twice:
            raise RuntimeError(f"two report sections make the {what} {sorted(twice)}")
        out.update(part)
    return out


def render_report(
    db_path: str | os.PathLike[str],
    out_html: str | os.PathLike[str],
    template: str | os.PathLike[str] | None = None,
    sections: tuple[Section, ...] = SECTIONS,
) -> Path:
    """Write ``out_html`` plus ``figures/*.png|svg`` and ``tables/*.csv|tex`` beside it.

    ``template``: a page of one's own (a Jinja2 file that may ``{% extends
    "report.html.j2" %}`` and replace blocks); default the shipped page. Everything is
    read before any folder is made: a bad results file leaves nothing behind."""
    out = Path(out_html)
    summary = summarize(db_path)
    with duckdb.connect(str(db_path), read_only=True) as con:
        run = Run.read(con, summary)
        data = {s.name: s.read(con, run) for s in sections}
    figures, tables = out.parent / "figures", out.parent / "tables"
    figures.mkdir(parents=True, exist_ok=True)
    tables.mkdir(parents=True, exist_ok=True)
    _write_tables(_one_each([s.tables(data[s.name]) for s in sections], "table"), tables)
    # Every figure is open until it is saved (about 25): no "more than 20 figures" warning.
    with plt.rc_context({"figure.max_open_warning": 0}):
        made = _one_each([s.figures(data[s.name], run) for s in sections], "figure")
        embedded = _embed(made, figures)
    page = {s.name: s.context(data[s.name], run) for s in sections}
    body = page_template(template).render(embedded=embedded, **page)
    with store.atomic_path(out) as tmp:
        tmp.write_text(body, encoding="utf-8")
    return out


def page_template(path: str | os.PathLike[str] | None = None) -> jinja2.Template:
    """The report's Jinja2 template (package data under ``templates/``), or the file
    ``path`` with the shipped templates beside it to extend; autoescaped, and an undefined
    name is an error. ``cells`` is there for the ``table`` macro."""
    loaders: list[jinja2.BaseLoader] = [jinja2.PackageLoader("vqarobust.report", "templates")]
    if path is not None:
        loaders.insert(0, jinja2.FileSystemLoader(Path(path).resolve().parent))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.globals["cells"] = cells
    return env.get_template(Path(path).name if path is not None else "report.html.j2")

"""Render the self-contained HTML report from the DuckDB results file.

Figures are embedded as base64 PNG, so ``index.html`` opens offline on its own; the
same figures and tables are also written next to it as PNG and CSV files.
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

import duckdb
import matplotlib.pyplot as plt
import polars as pl

from vqarobust import store
from vqarobust.metrics import SUBMETRICS
from vqarobust.report.figures import error_vs_severity, heatmap

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f2f2f2} td:first-child,th:first-child{text-align:left}
img{max-width:100%} .note{color:#555;font-size:13px}
"""


def _table_html(df: pl.DataFrame, digits: int = 4) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = []
    for row in df.iter_rows():
        cells = []
        for v in row:
            text = f"{v:.{digits}f}" if isinstance(v, float) else str(v)
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _png(fig: plt.Figure, path: Path) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = buf.getvalue()
    with store.atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return base64.b64encode(data).decode("ascii")


def _clean_vs_corrupted(con: duckdb.DuckDBPyConnection, kind: str) -> pl.DataFrame:
    """Per model and ``kind`` (question_type or answer_type): clean accuracy and the mean
    over every corrupted subset, from the ``{kind}_accuracy`` table."""
    return con.sql(
        f"""SELECT model, {kind},
                   avg(accuracy) FILTER (WHERE severity = 0) AS clean,
                   avg(accuracy) FILTER (WHERE severity > 0) AS corrupted,
                   max(n) FILTER (WHERE severity = 0) AS n
            FROM {kind}_accuracy GROUP BY ALL ORDER BY model, {kind}"""
    ).pl()


def render_report(db_path: str | os.PathLike[str], out_html: str | os.PathLike[str]) -> Path:
    """Write ``out_html`` plus ``figures/*.png`` and ``tables/*.csv`` beside it."""
    out = Path(out_html)
    figures, tables = out.parent / "figures", out.parent / "tables"
    figures.mkdir(parents=True, exist_ok=True)
    tables.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(db_path), read_only=True) as con:
        accuracy = con.sql("SELECT * FROM accuracy ORDER BY ALL").pl()
        sub = con.sql("SELECT * FROM submetrics ORDER BY model, corruption").pl()
        vre_model = con.sql("SELECT * FROM vre_model ORDER BY vre").pl()
        vre_corr = con.sql("SELECT * FROM vre_corruption ORDER BY vre DESC").pl()
        mmi = con.sql(
            "PIVOT (SELECT model, \"group\", mmi FROM mmi WHERE scope IN ('all', 'family')) "
            'ON "group" USING first(mmi) ORDER BY model'
        ).pl()
        rscore = con.sql(
            "PIVOT (SELECT model, severity, rscore FROM rscore WHERE corruption = 'all') "
            "ON severity USING first(rscore) ORDER BY model"
        ).pl()
        qtype = _clean_vs_corrupted(con, "question_type")
        atype = _clean_vs_corrupted(con, "answer_type")
        skipped = con.sql("SELECT * FROM skipped_images ORDER BY image_id").pl()
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        n_questions = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        n_images = con.execute("SELECT count(DISTINCT image_id) FROM questions").fetchone()[0]
    pivot = (
        accuracy.filter(pl.col("corruption") != "clean")
        .pivot(on="severity", index=["model", "corruption"], values="accuracy", sort_columns=True)
        .join(
            accuracy.filter(pl.col("corruption") == "clean").select(
                "model", pl.col("accuracy").alias("clean")
            ),
            on="model",
        )
        .sort("model", "corruption")
    )
    pivot = pivot.select("model", "corruption", "clean", *[c for c in pivot.columns if c.isdigit()])
    for name, df in (
        ("accuracy", accuracy),
        ("submetrics", sub),
        ("vre_model", vre_model),
        ("vre_corruption", vre_corr),
        ("mmi", mmi),
        ("rscore", rscore),
        ("question_type_accuracy", qtype),
        ("answer_type_accuracy", atype),
        ("skipped_images", skipped),
    ):
        with store.atomic_path(tables / f"{name}.csv") as tmp:
            df.write_csv(tmp)
    rel = _png(
        heatmap(sub, "relative_drop", "Relative accuracy drop A_rel(v, c)"),
        figures / "relative_drop.png",
    )
    avg = _png(
        heatmap(sub, "average_error", "Average error mu(v, c)", cmap="Blues"),
        figures / "average_error.png",
    )
    evs = _png(error_vs_severity(accuracy), figures / "error_vs_severity.png")
    metric_list = ", ".join(SUBMETRICS.get(m).label for m in SUBMETRICS)
    n_skipped = int(info.get("dataset.n_skipped_images", "0"))
    skipped_html = ""
    if n_skipped:
        listed = ", ".join(f"{i} ({r})" for i, r in skipped.head(20).iter_rows())
        skipped_html = (
            f'<p class="note"><b>{n_skipped} image{" was" if n_skipped == 1 else "s were"} '
            "skipped</b> "
            f"(missing or undecodable, policy on_bad_image: skip) with their "
            f"{html.escape(info.get('dataset.n_skipped_questions', '?'))} questions: "
            f"{html.escape(listed)}{' ...' if n_skipped > 20 else ''}</p>"
        )
    body = f"""<!doctype html><html><head><meta charset="utf-8">
<title>vqarobust report</title><style>{_CSS}</style></head><body>
<h1>VQA robustness report</h1>
<p class="note">{n_images} images, {n_questions} questions;
score: {html.escape(info.get("metric", "?"))};
VRE weights: {html.escape(info.get("weights", "?"))}. Lower VRE = more robust.
Sub-metrics ({html.escape(metric_list)}) are min-max scaled over the
model x corruption matrix.</p>{skipped_html}
<h2>VRE per model</h2>{_table_html(vre_model)}
<h2>VRE per corruption</h2>{_table_html(vre_corr)}
<h2>Relative drop</h2><img alt="relative drop heatmap" src="data:image/png;base64,{rel}">
<h2>Error vs severity</h2><img alt="error vs severity" src="data:image/png;base64,{evs}">
<h2>Average error</h2><img alt="average error heatmap" src="data:image/png;base64,{avg}">
<h2>MMI per model (all corruptions, and per corruption class; lower = more robust)</h2>
{_table_html(mmi)}
<h2>R_score per model and severity, over all corruptions (higher = more robust)</h2>
<p class="note">R_score parameters: {html.escape(info.get("rscore", "?"))} (percentage points).</p>
{_table_html(rscore)}
<h2>Accuracy per question type (clean, and mean over every corrupted subset)</h2>
{_table_html(qtype)}
<h2>Accuracy per answer type (clean, and mean over every corrupted subset)</h2>
{_table_html(atype)}
<h2>Accuracy per model, corruption and severity</h2>{_table_html(pivot)}
<h2>Warnings</h2><p class="note">{html.escape(info.get("warnings", "[]"))}</p>
</body></html>"""
    with store.atomic_path(out) as tmp:
        tmp.write_text(body, encoding="utf-8")
    return out

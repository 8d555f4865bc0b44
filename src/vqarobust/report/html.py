"""Render the self-contained HTML report from the DuckDB results file.

The report reads only the DuckDB file. ``index.html`` embeds its figures (base64 PNG),
so it opens offline on its own; every figure is also written beside it as PNG and SVG
(for papers), every table as CSV, and the VRE tables as LaTeX (booktabs). Figure
captions live in ``captions/*.rst`` (package data), shared with Snakemake's native report.
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import matplotlib.pyplot as plt
import polars as pl

from vqarobust import store
from vqarobust.analyses.accuracy import IMAGE_RELIANCE_RATIO
from vqarobust.metrics import SUBMETRICS
from vqarobust.report import figures as fig
from vqarobust.report.outputs import FIGURES, LATEX_TABLES, N_ANSWER_GRIDS, TABLES
from vqarobust.summary import (
    NO_IMAGE_SIDE,
    Summary,
    comparison_sentences,
    headline_table,
    interval_columns,
    reliance_sentence,
    summarize,
    table_names,
    with_interval,
)

CAPTIONS = Path(__file__).resolve().parent / "captions"
N_FLIPS = 8  # most frequent answer flips shown per model
TOP_QUESTION_TYPES = 15  # the question-type figure shows the most frequent types


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


ROW_END = " " + "\\" * 2  # LaTeX's row separator, two backslashes


def _latex(df: pl.DataFrame, digits: int = 3) -> str:
    """A booktabs table (no \\usepackage line; ``\\usepackage{booktabs}`` in the paper)."""

    def cell(v: object) -> str:
        text = f"{v:.{digits}f}" if isinstance(v, float) else str(v)
        return text.replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")

    lines = [r"\begin{tabular}{l" + "r" * (df.width - 1) + "}", r"\toprule",
             " & ".join(cell(c) for c in df.columns) + ROW_END, r"\midrule"]  # fmt: skip
    lines += [" & ".join(cell(v) for v in row) + ROW_END for row in df.iter_rows()]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _save(figure: plt.Figure, folder: Path, name: str) -> str:
    """Write PNG and SVG; return the PNG as base64 for embedding."""
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    svg = io.StringIO()
    figure.savefig(svg, format="svg", bbox_inches="tight")
    plt.close(figure)
    with store.atomic_path(folder / f"{name}.png") as tmp:
        tmp.write_bytes(buf.getvalue())
    with store.atomic_path(folder / f"{name}.svg") as tmp:
        tmp.write_text(svg.getvalue(), encoding="utf-8")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def answer_flips(con: duckdb.DuckDBPyConnection, n: int = N_FLIPS) -> pl.DataFrame:
    """Per model and modality (image corruptions, text perturbations), the most frequent
    (clean answer -> perturbed answer) changes among questions answered differently under
    a perturbation of the VRE tables than on the clean image."""
    return con.sql(
        f"""WITH flips AS (
                SELECT p.model, p.modality, c.answer AS clean_answer,
                       p.answer AS perturbed_answer, count(*) AS n
                FROM predictions p JOIN predictions c
                  ON c.model = p.model AND c.question_id = p.question_id AND c.severity = 0
                  AND c.modality = 'clean'
                WHERE p.severity > 0 AND p.answer <> c.answer
                  AND (p.modality, p.perturbation) IN (
                      SELECT (modality, perturbation) FROM vre_corruption)
                GROUP BY ALL)
            SELECT model, modality, clean_answer, perturbed_answer, n FROM (
                SELECT *, row_number() OVER (PARTITION BY model, modality
                          ORDER BY n DESC, clean_answer, perturbed_answer) AS k FROM flips)
            WHERE k <= {int(n)}
            ORDER BY model, modality, n DESC, clean_answer, perturbed_answer"""
    ).pl()


def _model_cards(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The model_cards table with VRE and its interval as one text column."""
    if "model_cards" not in table_names(con):
        return pl.DataFrame()
    cards = con.sql("SELECT * FROM model_cards ORDER BY model").pl()
    return interval_columns(cards).with_columns(
        pl.col("parameters").map_elements(lambda n: f"{n:,}", return_dtype=pl.String)
    )


def _type_grid(con: duckdb.DuckDBPyConnection, top: int) -> pl.DataFrame:
    """The ``top`` most frequent question types x image corruptions, mean accuracy over
    the models, as (model = question type, corruption, accuracy) for the heatmap."""
    from vqarobust.analyses.accuracy import ALL_MODELS

    if "question_type_perturbation" not in table_names(con):  # written before it existed
        return pl.DataFrame(schema={"model": pl.String, "corruption": pl.String,
                                    "accuracy": pl.Float64})  # fmt: skip
    return con.sql(
        f"""SELECT q.question_type AS model, q.perturbation AS corruption, q.accuracy
            FROM question_type_perturbation q
            JOIN (SELECT question_type FROM questions GROUP BY ALL
                  ORDER BY count(*) DESC, question_type LIMIT {int(top)}) t USING (question_type)
            WHERE q.model = '{ALL_MODELS}' AND q.modality = 'image'
              AND q.perturbation IN (
                  SELECT perturbation FROM vre_corruption WHERE modality = 'image')"""
    ).pl()


def _image_quality(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """The severity calibration: ``quality`` (per corruption x severity, long),
    ``ssim_grid`` (corruption x severity of mean SSIM), ``quality_accuracy`` (each subset's
    accuracy per model) and ``image_quality_correlation``; empty without the tables."""
    if "image_quality" not in table_names(con):  # written before quality scores
        return {}
    quality = con.sql("SELECT * FROM image_quality ORDER BY ALL").pl()
    if quality.is_empty():
        return {}
    grid = con.sql(
        """PIVOT (SELECT perturbation AS corruption, severity, ssim_mean FROM image_quality)
           ON severity USING first(ssim_mean) ORDER BY corruption"""
    ).pl()
    grid = grid.rename({c: f"SSIM {c}" for c in grid.columns if c != "corruption"})
    return {
        "quality": quality,
        "ssim_grid": grid,
        "quality_accuracy": con.sql(
            """SELECT a.model, a.perturbation, a.severity, a.accuracy FROM accuracy a
               JOIN image_quality q USING (perturbation, severity)
               WHERE a.modality = 'image'"""
        ).pl(),
        "image_quality_correlation": con.sql(
            "SELECT * FROM image_quality_correlation ORDER BY model"
        ).pl(),
    }


def _attention_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """``attention_shift`` (empty when the database has none)."""
    if "attention_shift" not in table_names(con):
        return pl.DataFrame()
    return con.sql("SELECT * FROM attention_shift ORDER BY ALL").pl()


def _attention_context(shift: pl.DataFrame) -> dict[str, Any] | None:
    """The "Attention shift" section: the sample size and the JS divergence per model x
    corruption with one column per severity; None without attention maps."""
    if shift.is_empty():
        return None
    wide = (
        shift.with_columns(pl.col("severity").cast(pl.String))
        .pivot("severity", index=["model", "perturbation"], values="js_mean")
        .sort("model", "perturbation")
        .rename({"perturbation": "corruption"})
    )
    return {"n": int(shift["n_questions"].max()), "wide": wide}


def _quality_context(side: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The "Severity calibration" section; None without quality scores."""
    if not side:
        return None
    return {"n_identical": int(side["quality"]["n_identical"].sum()),
            "ssim_grid": side["ssim_grid"], "quality": side["quality"],
            "correlation": side["image_quality_correlation"]}  # fmt: skip


def _colour_context(con: duckdb.DuckDBPyConnection, outside: list[str]) -> dict[str, Any] | None:
    """Colour answers on grayscale images (the visual-robustness paper's Figure A.4);
    None when the run has no grayscale subset."""
    from vqarobust.metrics.colour_bias import GREYS

    if "colour_bias" not in table_names(con):
        return None
    bias = con.sql("SELECT * FROM colour_bias ORDER BY model").pl()
    if bias.is_empty():
        return None
    examples = con.sql("SELECT * FROM colour_bias_examples ORDER BY model, rank").pl()
    return {
        "bias": bias,
        "greys": ", ".join(sorted(GREYS)),
        "kept_out": "grayscale" in outside,
        "examples": [
            {**r, "images": [("grayscale", _b64(r["png"]))]} for r in examples.iter_rows(named=True)
        ],  # fmt: skip
    }


def _mispredictions(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Misprediction kinds per model x modality (counts over every perturbation and
    severity, and each kind's share), and the stored examples."""
    from vqarobust.metrics.mispredictions import KINDS

    if "mispredictions" not in table_names(con):
        return pl.DataFrame(), pl.DataFrame()
    long = con.sql(
        "SELECT model, modality, kind, CAST(sum(n) AS BIGINT) AS n FROM mispredictions GROUP BY ALL"
    ).pl()
    if long.is_empty():
        return pl.DataFrame(), con.sql("SELECT * FROM misprediction_examples").pl()
    wide = long.pivot("kind", index=["model", "modality"], values="n").fill_null(0)
    present = [k for k in KINDS if k in wide.columns]
    wide = wide.with_columns(pl.sum_horizontal(present).alias("mispredictions"))
    wide = wide.with_columns(
        [(pl.col(k).cast(pl.Float64) / pl.col("mispredictions")).alias(k) for k in present]
    )
    wide = wide.select("model", "modality", "mispredictions", *present).sort("model", "modality")
    examples = con.sql("SELECT * FROM misprediction_examples ORDER BY ALL").pl()
    return wide, examples


def _examples_context(examples: pl.DataFrame) -> list[dict[str, Any]]:
    """Each stored example with its clean image and the image the model saw (base64)."""
    return [
        {**r, "images": [("clean", _b64(r["clean_png"])), ("seen", _b64(r["perturbed_png"]))]}
        for r in examples.iter_rows(named=True)
    ]


def _b64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")


def _reading(s: Summary) -> str:
    """A plain-language paragraph from the summary numbers; it calls one model more robust
    than another only where the interval of their VRE difference excludes zero."""
    if s.models.is_empty():
        return NO_IMAGE_SIDE
    best = s.models.row(0, named=True)
    vre = with_interval(best["vre"], best["vre_low"], best["vre_high"])
    accuracy = (f"accuracy {best['clean']:.3f} clean and {best['corrupted']:.3f} on average "
                "over the corruptions at severities 1-5, a relative drop of "
                f"{best['relative_drop']:.1%}")  # fmt: skip
    if s.models.height < 2:
        text = [f"{best['model']}: {accuracy}. With one model VRE weighs only the corruptions "
                "against each other, so no model VRE is given (its unscaled sub-metrics are "
                "in the summary and the tables)."]  # fmt: skip
    else:
        text = [f"{best['model']} has the lowest VRE ({vre}; {accuracy})."]
    text += comparison_sentences(s)
    caveat = reliance_sentence(s, IMAGE_RELIANCE_RATIO)
    if caveat and not caveat.startswith("Every"):
        text.append(caveat)
    strong, weak = s.corruptions.row(0, named=True), s.corruptions.row(-1, named=True)
    text.append(
        f"The strongest corruption is {strong['corruption']} (VRE "
        f"{with_interval(strong['vre'], strong['vre_low'], strong['vre_high'])}; severity-"
        f"aggregated drop A_rel {strong['aggregated_drop']:.1%} over the models, severities "
        f"0-5 as in the paper); the weakest is {weak['corruption']} (VRE "
        f"{with_interval(weak['vre'], weak['vre_low'], weak['vre_high'])})."
    )
    return " ".join(text)


def _settings(info: dict[str, str], n_images: int, n_questions: int) -> pl.DataFrame:
    weights = json.loads(info.get("weights", '"uniform"'))
    rscore = json.loads(info.get("rscore", "{}"))
    rows = [
        ("dataset", f"{info.get('dataset.adapter', '?')} "
                    f"({info.get('dataset.split', info.get('dataset.questions', ''))})".strip()),
        ("images / questions", f"{n_images:,} / {n_questions:,}"),
        ("seed", info.get("dataset.seed", "?")),
        ("scoring", info.get("metric", "?")),
        ("VRE weights", "uniform (0.2 each)" if weights == "uniform"
         or len(set(weights.values())) == 1 else
         ", ".join(f"{k} {v:.2f}" for k, v in weights.items())),
        ("R_score t, m (points)", f"{rscore.get('tolerance', '?')}, {rscore.get('maximum', '?')}"),
    ]  # fmt: skip
    rows += [(k.removeprefix("version."), v) for k, v in info.items() if k.startswith("version.")]
    return pl.DataFrame(rows, schema=["setting", "value"], orient="row")


def _provenance(info: dict[str, str]) -> pl.DataFrame:
    """The ``provenance.*`` keys of run_info (``vqarobust provenance`` prints the same)."""
    from vqarobust.provenance import PREFIX

    rows = [(k.removeprefix(PREFIX), v) for k, v in info.items() if k.startswith(PREFIX)]
    return pl.DataFrame(rows, schema=["key", "value"], orient="row")


def _image_tables(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The image side's tables: accuracy with intervals, sub-metrics, VRE, MMI, R_score."""
    accuracy = con.sql(
        """SELECT a.*, i.low, i.high FROM corruption_accuracy a
           LEFT JOIN intervals i ON i.metric = 'accuracy' AND i.model = a.model
             AND i.perturbation = a.corruption AND i.severity = a.severity
             AND i.modality IN ('clean', 'image')
           ORDER BY ALL"""
    ).pl()
    not_significant = {
        (m, p) for m, p in con.execute(
            "SELECT model, perturbation FROM drop_tests WHERE modality = 'image' "
            "GROUP BY ALL HAVING NOT bool_or(significant)").fetchall()
    }  # fmt: skip
    sub = con.sql(
        "SELECT model, perturbation AS corruption, * EXCLUDE (model, modality, perturbation) "
        "FROM submetrics WHERE modality = 'image' ORDER BY model, corruption"
    ).pl()
    vre_model = con.sql(
        "SELECT * EXCLUDE (modality) FROM vre_model WHERE modality = 'image' ORDER BY vre"
    ).pl()
    vre_corr = con.sql(
        "SELECT perturbation AS corruption, * EXCLUDE (modality, perturbation) "
        "FROM vre_corruption WHERE modality = 'image' ORDER BY vre DESC"
    ).pl()
    sweep = (
        con.sql("SELECT * EXCLUDE (modality) FROM vre_sweep WHERE modality = 'image'")
        .pl()
        .with_columns(pl.col("scope").replace("perturbation", "corruption"))
    )
    mmi = con.sql(
        "PIVOT (SELECT model, \"group\", mmi FROM mmi WHERE modality = 'image' "
        "AND scope IN ('all', 'family')) ON \"group\" USING first(mmi) ORDER BY model"
    ).pl()
    rscore = con.sql(
        "PIVOT (SELECT model, severity, rscore FROM rscore WHERE modality = 'image' "
        "AND perturbation = 'all') ON severity USING first(rscore) ORDER BY model"
    ).pl()
    return {"accuracy": accuracy, "not_significant": not_significant, "sub": sub,
            "vre_model": vre_model, "vre_corr": vre_corr, "sweep": sweep, "mmi": mmi,
            "rscore": rscore}  # fmt: skip


def _type_tables(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """Accuracy per question and answer type: clean vs perturbed, and per subset."""
    image = "modality IN ('clean', 'image')"
    return {
        "qtype": _clean_vs_perturbed(con, "question_type"),
        "atype": _clean_vs_perturbed(con, "answer_type"),
        "atype_long": con.sql(
            "SELECT model, perturbation AS corruption, severity, answer_type, n, accuracy "
            f"FROM answer_type_accuracy WHERE {image}"
        ).pl(),
        "qtype_long": con.sql(
            "SELECT model, perturbation AS corruption, severity, question_type, n, accuracy "
            f"FROM question_type_accuracy WHERE {image}"
        ).pl(),
        "type_grid": _type_grid(con, TOP_QUESTION_TYPES),
    }


def _read(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Everything the page shows, read from the results file."""
    data = {**_image_tables(con), **_type_tables(con)}
    kinds, kind_examples = _mispredictions(con)
    info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
    data.update(
        uncertainty=_uncertainty_side(con), flips=answer_flips(con), kinds=kinds,
        kind_examples=kind_examples, quality_side=_image_quality(con),
        shift=_attention_side(con), cards=_model_cards(con),
        skipped=con.sql("SELECT * FROM skipped_images ORDER BY image_id").pl(),
        reliance=con.sql(
            "SELECT model, control_accuracy, ratio, uses_image_little FROM image_reliance "
            "WHERE control = 'blank'"
        ).pl(),
        info=info, colour=_colour_context(con, json.loads(info.get("outside_metrics", "[]"))),
        question_side=_question_side(con), samples=_samples(con), context=_context_side(con),
    )  # fmt: skip
    data["families"] = dict(data["vre_corr"].select("corruption", "family").iter_rows())
    return data


def _write_tables(d: dict[str, Any], tables: Path) -> None:
    """Every report table as CSV, the VRE tables also as LaTeX."""
    quality = d["quality_side"]
    frames = {"accuracy": d["accuracy"], "submetrics": d["sub"], "vre_model": d["vre_model"],
              "vre_corruption": d["vre_corr"], "mmi": d["mmi"], "rscore": d["rscore"],
              "question_type_accuracy": d["qtype"], "answer_type_accuracy": d["atype"],
              "answer_flips": d["flips"], "skipped_images": d["skipped"],
              "misprediction_kinds": d["kinds"],
              "image_quality": quality.get("quality", pl.DataFrame()),
              "attention_shift": d["shift"],
              "image_quality_correlation": quality.get("image_quality_correlation",
                                                       pl.DataFrame()),
              **d["question_side"], **{k: v for k, v in d["context"].items() if k in TABLES},
              **{k: v for k, v in d["uncertainty"].items() if k in TABLES}}  # fmt: skip
    for name in TABLES:
        with store.atomic_path(tables / f"{name}.csv") as tmp:
            frames[name].write_csv(tmp)
    for name in LATEX_TABLES:
        with store.atomic_path(tables / f"{name}.tex") as tmp:
            tmp.write_text(_latex(frames[name].drop("family", strict=False)), encoding="utf-8")


def _figures(d: dict[str, Any], summary: Summary, folder: Path) -> dict[str, str]:
    """Every figure, saved as PNG and SVG; returns the embeddable PNGs by name."""
    sub, families, quality, shift = d["sub"], d["families"], d["quality_side"], d["shift"]
    labels = {m: SUBMETRICS.get(m).label for m in SUBMETRICS}
    # A run without image perturbations (GQA read without images) has no image side.
    image_side = not sub.is_empty()

    def no_images() -> Any:
        return None if image_side else fig.placeholder("No image perturbations in this run.")

    # Every figure is open until it is saved just below (about 25): no "more than 20
    # figures" warning for that.
    with plt.rc_context({"figure.max_open_warning": 0}):
        made = {
            "relative_drop": no_images() or fig.heatmap(
                sub, "relative_drop", "Severity-aggregated relative drop A_rel", families,
                not_significant=d["not_significant"]),
            "average_error": no_images() or fig.heatmap(sub, "average_error", "Average error",
                                                      families, "Blues"),
            "error_vs_severity": no_images() or fig.error_vs_severity(d["accuracy"], families),
            "radar": no_images() or fig.radars(sub, labels),
            "vre_sweep": no_images() or fig.vre_sweep(d["sweep"]),
            "answer_type_accuracy": fig.type_accuracy(d["atype_long"], "answer_type", families),
            "question_type_accuracy": fig.type_accuracy(d["qtype_long"], "question_type",
                                                        families, top=TOP_QUESTION_TYPES),
            "question_type_perturbation": fig.heatmap(
                d["type_grid"], "accuracy", "Accuracy per question type x corruption (mean "
                "over models, severities 1-5)", families, "Blues") if d["type_grid"].height
            else fig.placeholder("No question_type_perturbation table in this database."),
            "image_quality": fig.image_quality(quality["quality"], quality["quality_accuracy"],
                                               families)
            if quality else fig.placeholder("No image quality scores in this database."),
            "attention_shift": fig.attention_shift(shift, families) if shift.height
            else fig.placeholder("No attention maps in this database."),
            **_question_figures(d["question_side"]),
            **_context_figures(d["context"]),
            **_uncertainty_figures(d["uncertainty"], summary.level),
            **_answer_grids(d["samples"], families),
        }  # fmt: skip
        return {name: _save(made[name], folder, name) for name in FIGURES}


def _summary_context(d: dict[str, Any], summary: Summary) -> dict[str, Any]:
    """The page's opening: the reading, the headline table, image reliance, skips."""
    headline, reliance, info = headline_table(summary), d["reliance"], d["info"]
    models = headline.join(reliance.select("model", pl.col("control_accuracy").alias(
        "accuracy without the image (blank)")), on="model", how="left")  # fmt: skip
    models = models.select(*headline.columns[:2], "accuracy without the image (blank)",
                           *headline.columns[2:])  # fmt: skip
    k = min(3, max(1, summary.corruptions.height // 2))
    n_skipped = int(info.get("dataset.n_skipped_images", "0"))
    little = reliance.filter(pl.col("uses_image_little"))
    return {
        "reading": _reading(summary),
        "image_side": not summary.models.is_empty(),
        "models": models,
        "interval_note": _interval_note(summary),
        "level": summary.level,
        "strongest": ", ".join(summary.corruptions.head(k)["corruption"]),
        "weakest": ", ".join(summary.corruptions.tail(k).reverse()["corruption"]),
        "reliance": {
            "little": ", ".join(f"{m} ({r:.0%} of its clean accuracy without the image)"
                                for m, r in little.select("model", "ratio").iter_rows()),
            "n_little": little.height, "any": reliance.height > 0,
            "ratio": IMAGE_RELIANCE_RATIO,
        },
        "skipped": {
            "n": n_skipped, "n_questions": info.get("dataset.n_skipped_questions", "?"),
            "listed": ", ".join(f"{i} ({r})" for i, r in d["skipped"].head(20).iter_rows()),
        } if n_skipped else None,
    }  # fmt: skip


def _page(d: dict[str, Any], summary: Summary, embedded: dict[str, str]) -> dict[str, Any]:
    """The template's context: every section's tables, figures and sentences."""
    info = d["info"]
    return {
        "figures": {name: {"png": embedded[name], "caption": caption(name)} for name in FIGURES},
        "summary": _summary_context(d, summary),
        "settings": _settings(info, summary.n_images, summary.n_questions),
        "question_type_grid": d["type_grid"].height > 0,
        "quality": _quality_context(d["quality_side"]),
        "attention": _attention_context(d["shift"]),
        "uncertainty": _uncertainty_context(d["uncertainty"]),
        "questions": _question_context(d["question_side"]),
        "context": _context_context(d["context"]),
        "sample_grids": list(range(1, min(len(d["samples"]), N_ANSWER_GRIDS) + 1)),
        "failures": {
            "flips": d["flips"], "kinds": d["kinds"],
            "examples": _examples_context(d["kind_examples"]), "colour": d["colour"],
        },
        "tables": {"cards": d["cards"], "vre_model": d["vre_model"],
                   "vre_corruption": d["vre_corr"], "mmi": d["mmi"], "rscore": d["rscore"],
                   "question_type": d["qtype"], "answer_type": d["atype"]},
        "warnings": json.loads(info.get("warnings", "[]")),
        "provenance": _provenance(info) if any(k.startswith("provenance.") for k in info)
        else None,
    }  # fmt: skip


def render_report(
    db_path: str | os.PathLike[str],
    out_html: str | os.PathLike[str],
    template: str | os.PathLike[str] | None = None,
) -> Path:
    """Write ``out_html`` plus ``figures/*.png|svg`` and ``tables/*.csv|tex`` beside it.

    ``template``: a page of one's own (a Jinja2 file that may ``{% extends
    "report.html.j2" %}`` and replace blocks); default the shipped page. Everything is
    read before any folder is made: a bad results file leaves nothing behind."""
    out = Path(out_html)
    summary = summarize(db_path)
    with duckdb.connect(str(db_path), read_only=True) as con:
        data = _read(con)
    figures, tables = out.parent / "figures", out.parent / "tables"
    figures.mkdir(parents=True, exist_ok=True)
    tables.mkdir(parents=True, exist_ok=True)
    _write_tables(data, tables)
    page = _page(data, summary, _figures(data, summary, figures))
    body = page_template(template).render(**page)
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


def _clean_vs_perturbed(con: duckdb.DuckDBPyConnection, kind: str) -> pl.DataFrame:
    """Per model and ``kind`` (question_type or answer_type): clean accuracy and the mean
    over every corrupted image subset, from the ``{kind}_accuracy`` table."""
    return con.sql(
        f"""SELECT model, {kind},
                   avg(accuracy) FILTER (WHERE severity = 0) AS clean,
                   avg(accuracy) FILTER (WHERE severity > 0) AS perturbed,
                   max(n) FILTER (WHERE severity = 0) AS n
            FROM {kind}_accuracy WHERE modality IN ('clean', 'image')
            GROUP BY ALL ORDER BY model, {kind}"""
    ).pl()


# Severities / levels whose perturbed questions the example table shows.
EXAMPLE_SEVERITIES = (1, 3, 5)
EXAMPLE_LEVELS = (1, 4, 7)


def _question_side(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """The tables of the question side: text accuracy, VRE over text perturbations, MMI
    across modalities, R_score per basic-question level and per text perturbation,
    example questions, truncation counts and skipped perturbations."""
    out = {
        "text_accuracy": con.sql(
            """SELECT a.model, a.perturbation, a.severity, a.n, a.accuracy, i.low, i.high
               FROM accuracy a
               LEFT JOIN intervals i ON i.metric = 'accuracy' AND i.model = a.model
                 AND i.modality = a.modality AND i.perturbation = a.perturbation
                 AND i.severity = a.severity
               WHERE a.modality IN ('text', 'clean') ORDER BY ALL"""
        ).pl(),
        "vre_text": con.sql(
            "SELECT * EXCLUDE (modality) FROM vre_model WHERE modality = 'text' ORDER BY vre"
        ).pl(),
        "mmi_modalities": con.sql(
            "PIVOT (SELECT model, \"group\", mmi FROM mmi WHERE scope = 'modality') "
            'ON "group" USING first(mmi) ORDER BY model'
        ).pl(),
        "mmi_long": con.sql(
            """SELECT m.model, m."group", m.mmi, i.low, i.high FROM mmi m
               LEFT JOIN intervals i ON i.metric = 'mmi' AND i.model = m.model
                 AND i.modality = 'all' AND i.key = 'modality' AND i.perturbation = m."group"
               WHERE m.scope = 'modality'"""
        ).pl(),
        "rscore_basic_questions": con.sql(
            """SELECT r.model, r.perturbation AS ranker, r.severity AS level, r.acc_clean,
                      r.acc_noisy, r.acc_di, r.rscore, i.low, i.high
               FROM rscore r
               LEFT JOIN intervals i ON i.metric = 'rscore' AND i.model = r.model
                 AND i.modality = r.modality AND i.perturbation = r.perturbation
                 AND i.severity = r.severity
               WHERE r.modality = 'basic_question' AND r.perturbation <> 'all' ORDER BY ALL"""
        ).pl(),
        "rscore_datasets": _rscore_datasets(con),
        "vqabq_scores": con.sql("SELECT * FROM vqabq_scores").pl()
        if "vqabq_scores" in table_names(con)
        else pl.DataFrame(),
        "vqabq": con.sql("SELECT * FROM vqabq ORDER BY split, model").pl()
        if "vqabq" in table_names(con)
        else pl.DataFrame(),
        "ranker_comparison": _ranker_comparison(con),
        "rscore_text": con.sql(
            "PIVOT (SELECT model, perturbation, rscore FROM rscore WHERE modality = 'text') "
            "ON perturbation USING avg(rscore) ORDER BY model"
        ).pl(),
        "question_examples": _question_examples(con),
        "truncated_questions": con.sql(
            "SELECT model, modality, perturbation, CAST(sum(truncated) AS BIGINT) AS truncated, "
            "CAST(sum(n) AS BIGINT) AS n "
            "FROM accuracy GROUP BY ALL HAVING sum(truncated) > 0 ORDER BY ALL"
        ).pl(),
        # Every model, zeros included, so none is missing from the count.
        "truncated_totals": con.sql(
            "SELECT model, modality, CAST(sum(truncated) AS BIGINT) AS truncated, "
            "CAST(sum(n) AS BIGINT) AS asked FROM accuracy GROUP BY ALL ORDER BY ALL"
        ).pl(),
        "skipped_perturbations": con.sql("SELECT * FROM skipped_perturbations").pl(),
        "fidelity_drops": con.sql("SELECT * FROM fidelity_drops ORDER BY ALL").pl()
        if "fidelity_drops" in table_names(con)
        else pl.DataFrame(),
    }
    return out


def _rscore_datasets(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """R_score1 (general BQ dataset) and R_score2 (yes/no) per model and ranker: the
    R_score of the mean deterioration over the levels (table ``rscore_overall``), with
    its bootstrap interval."""
    from vqarobust.text import ranking as bq

    schema = {"model": pl.String, "ranker": pl.String}
    if "rscore_overall" not in table_names(con):
        return pl.DataFrame(schema=schema)
    rows = con.sql(
        """SELECT r.model, r.perturbation, r.levels, r.acc_di, r.rscore, i.low, i.high
           FROM rscore_overall r
           LEFT JOIN intervals i ON i.metric = 'rscore_overall' AND i.model = r.model
             AND i.modality = r.modality AND i.perturbation = r.perturbation
           WHERE r.modality = 'basic_question' ORDER BY ALL"""
    ).pl()
    if not rows.height:
        return pl.DataFrame(schema=schema)
    names = rows["perturbation"].unique().to_list()
    info = pl.DataFrame({"perturbation": names,
                         "ranker": [bq.ranker_name(n) for n in names],
                         "dataset": [bq.bq_dataset(n) for n in names]})  # fmt: skip
    rows = rows.join(info, on="perturbation")
    out = rows.select("model", "ranker").unique().sort("model", "ranker")
    for dataset, label in (("general", "R_score1"), ("yes_no", "R_score2")):
        part = rows.filter(pl.col("dataset") == dataset)
        if not part.height:
            continue
        out = out.join(
            part.select("model", "ranker", pl.col("acc_di").alias(f"{label} mean drop (pts)"),
                        pl.col("rscore").alias(label), pl.col("low").alias(f"{label} low"),
                        pl.col("high").alias(f"{label} high")),
            on=["model", "ranker"], how="left",
        )  # fmt: skip
    return out


def _ranker_comparison(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Level control per basic-question perturbation (:mod:`vqarobust.metrics.level_control`)
    from the accuracy table, most controllable first."""
    from vqarobust.metrics.level_control import level_control, ranker_comparison

    acc = con.sql(
        "SELECT model, perturbation, severity, accuracy FROM accuracy "
        "WHERE modality = 'basic_question'"
    ).pl()
    return ranker_comparison(level_control(acc))


def ranker_sentence(comparison: pl.DataFrame) -> str | None:
    """The report's sentence on the most level-controllable ranker (first row)."""
    ranked = comparison.filter(pl.col("spearman").is_not_null())
    if not ranked.height:
        return None
    best = ranked.row(0, named=True)
    return (f"The most level-controllable noise here comes from {best['perturbation']}: "
            f"accuracy's rank correlation with the level is {best['spearman']:.3f} (mean over "
            f"{best['models']} models), {best['non_rising']:.1%} of the steps from one level "
            f"to the next do not raise accuracy, and accuracy falls by "
            f"{best['first_to_last']:.3f} from the first level to the last.")  # fmt: skip


def _question_examples(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One question (the longest of the first 20) under every text perturbation at
    severities 1, 3, 5 and every ranker at levels 1, 4, 7."""
    sets = con.sql(
        "SELECT question_id, original, perturbation, severity, perturbed AS question "
        "FROM question_sets WHERE question_id IN (SELECT DISTINCT question_id FROM "
        "question_sets WHERE question_id IN (SELECT question_id FROM questions) "
        "ORDER BY question_id LIMIT 20)"
    ).pl()
    if not sets.height:
        return pl.DataFrame(schema={"perturbation": pl.String, "severity": pl.Int8,
                                    "question": pl.String})  # fmt: skip
    by_length = sets.unique("question_id").sort(
        pl.col("original").str.len_chars(), "question_id", descending=[True, False]
    )
    first = by_length.row(0, named=True)
    rows = sets.filter(pl.col("question_id") == first["question_id"])
    shown = (
        pl.when(pl.col("perturbation").str.contains("^(yn)?bq_"))
        .then(pl.col("severity").is_in(EXAMPLE_LEVELS))
        .otherwise(pl.col("severity").is_in(EXAMPLE_SEVERITIES))
    )
    original = pl.DataFrame(
        {"perturbation": ["original"], "severity": [0], "question": [first["original"]]},
        schema={"perturbation": pl.String, "severity": pl.Int8, "question": pl.String},
    )
    picked = rows.filter(shown).select("perturbation", "severity", "question")
    return pl.concat([original, picked.sort("perturbation", "severity")])


def _question_figures(side: dict[str, pl.DataFrame]) -> dict[str, plt.Figure]:
    text = side["text_accuracy"]
    from vqarobust import text as text_perturbations

    registered = set(text_perturbations.names())
    text_families = {
        p: text_perturbations.level(p) if p in registered else "other"
        for p in text["perturbation"].unique()
    }
    rows = text.rename({"perturbation": "corruption"})
    has_text = text.filter(pl.col("severity") > 0).height > 0
    bq = side["rscore_basic_questions"]
    return {
        "text_error_vs_severity": fig.error_vs_severity(rows, text_families)
        if has_text else fig.placeholder("No text perturbations in this run."),
        "mmi_modalities": fig.mmi_modalities(side["mmi_long"])
        if side["mmi_long"].height else fig.placeholder("No modality to compare."),
        "rscore_basic_questions": fig.rscore_levels(
            bq.rename({"level": "severity"}).with_columns(
                pl.col("ranker").str.replace("^ynbq_(.*)$", "${1} (yes/no)").str.strip_prefix("bq_")
            )
        ) if bq.height else fig.placeholder("No basic-question noise in this run."),
    }  # fmt: skip


def _samples(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """Per sample question: its text, most common answer, thumbnails and every model's
    answers on the clean and corrupted images."""
    thumbs = con.sql("SELECT * FROM sample_images").pl()
    # The first model with attention maps draws its attention over the grid's images.
    attention = (
        con.sql("SELECT * FROM attention_maps ORDER BY model").pl()
        if "attention_maps" in table_names(con)
        else pl.DataFrame(schema={"model": pl.String, "question_id": pl.Int64})
    )
    if attention.height:
        attention = attention.filter(pl.col("model") == attention["model"][0])
    out = []
    for qid in sorted(set(thumbs["question_id"])):
        q = con.execute(
            "SELECT question, answers FROM questions WHERE question_id = ?", [qid]
        ).fetchall()[0]
        answers = con.sql(
            "SELECT model, perturbation, severity, answer, score FROM predictions "
            f"WHERE question_id = {int(qid)} AND modality IN ('clean', 'image')"
        ).pl()
        truth = max(set(q[1]), key=lambda a: (q[1].count(a), a))
        out.append({"question": q[0], "truth": truth, "answers": answers,
                    "thumbs": thumbs.filter(pl.col("question_id") == qid),
                    "attention": attention.filter(pl.col("question_id") == qid)})  # fmt: skip
    return out


def _registry_family(name: str) -> str:
    """The class the corruption registry gives ``name``; ``control`` for the clean
    subset and for names it does not hold."""
    from vqarobust.corruptions import CORRUPTIONS, family

    return family(name) if name in CORRUPTIONS.list() else "control"


def _answer_grids(samples: list[dict], families: dict[str, str]) -> dict[str, plt.Figure]:
    figures = {}
    for k in range(1, N_ANSWER_GRIDS + 1):
        if k <= len(samples):
            s = samples[k - 1]
            # Controls (blank) are no corruption class; the grid shows them last. A
            # corruption outside the VRE tables (grayscale) keeps its registry class.
            shown = {p: families.get(p) or _registry_family(p)
                     for p in set(s["thumbs"]["perturbation"])}  # fmt: skip
            maps = s["attention"]
            figures[f"answer_grid_{k}"] = fig.answer_grid(
                s["question"], s["truth"], s["thumbs"], s["answers"], shown,
                maps if maps.height else None, maps["model"][0] if maps.height else None,
            )  # fmt: skip
        else:
            figures[f"answer_grid_{k}"] = fig.placeholder(f"No sample question {k}.")
    return figures


def _levels_wide(rscore: pl.DataFrame) -> pl.DataFrame:
    """R_score with one column per basic-question level (the CSV keeps the long table)."""
    if not rscore.height:
        return rscore
    wide = rscore.pivot(on="level", index=["model", "ranker"], values="rscore")
    return wide.select("model", "ranker", *sorted(wide.columns[2:], key=int)).sort(
        "model", "ranker"
    )


def _question_context(side: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The "Question perturbations" section; None when the run perturbed no question."""
    skipped, drops = side["skipped_perturbations"], side["fidelity_drops"]
    has_text = side["text_accuracy"].filter(pl.col("severity") > 0).height > 0
    bq = side["rscore_basic_questions"]
    if not (has_text or bq.height or skipped.height or drops.height or side["vqabq"].height):
        return None
    dropped = int(drops["n_dropped"].sum()) if drops.height else 0
    return {
        "skipped": {"n": skipped.height, "names": ", ".join(skipped["perturbation"]),
                    "reason": "; ".join(sorted(set(skipped["reason"])))}
        if skipped.height else None,
        "drops": {"n": dropped, "n_sets": int((drops["n_dropped"] > 0).sum()), "table": drops}
        if dropped else None,
        "vre_text": side["vre_text"],
        "mmi_modalities": side["mmi_modalities"],
        "rscore_text": side["rscore_text"],
        "levels": _levels_wide(bq),
        "datasets": side["rscore_datasets"],
        "rankers": side["ranker_comparison"],
        "ranker_sentence": ranker_sentence(side["ranker_comparison"]),
        "vqabq_scores": side["vqabq_scores"],
        "vqabq": side["vqabq"],
        "examples": side["question_examples"],
        "truncated_totals": side["truncated_totals"],
        "truncated": side["truncated_questions"],
    }  # fmt: skip


def _context_side(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """SwapMix tables: reliance, effective accuracy and the flipped examples (with their
    thumbnails as ``examples_png``; ``context_examples`` without them for the CSV)."""
    tables = table_names(con)
    examples = (con.sql("SELECT * FROM context_examples ORDER BY rank").pl()
                if "context_examples" in tables else pl.DataFrame())  # fmt: skip
    return {
        "context_reliance": con.sql(
            """SELECT c.*, i.low, i.high FROM context_reliance c
               LEFT JOIN intervals i ON i.metric = 'context_reliance' AND i.model = c.model
                 AND i.perturbation = c.perturbation ORDER BY ALL"""
        ).pl(),
        "effective_accuracy": con.sql(
            """SELECT e.*, i.low, i.high FROM effective_accuracy e
               LEFT JOIN intervals i ON i.metric = 'effective_accuracy' AND i.model = e.model
                 AND i.perturbation = e.perturbation ORDER BY ALL"""
        ).pl(),
        "context_examples": examples.drop("clean_png", "swapped_png", strict=False),
        "examples_png": examples,
        **_context_paper_side(con, tables),
    }


def _context_paper_side(
    con: duckdb.DuckDBPyConnection, tables: set[str]
) -> dict[str, pl.DataFrame]:
    """The paper's Table 1 and Table 2 layouts and the findings (docs/context.md)."""
    from vqarobust.metrics.context_paper import FINDING_SCHEMA, paper_table1, paper_table2

    def read(name: str) -> pl.DataFrame | None:
        return con.sql(f"SELECT * FROM {name} ORDER BY ALL").pl() if name in tables else None

    inputs, reliance_k, findings = (read(n) for n in ("model_inputs", "context_reliance_k",
                                                       "context_findings"))  # fmt: skip
    if inputs is None or "context_reliance" not in tables:
        return {"context_table1": pl.DataFrame(), "context_table2": pl.DataFrame(),
                "context_findings": pl.DataFrame(schema=FINDING_SCHEMA)}  # fmt: skip
    reliance = con.sql(
        """SELECT c.*, i.low, i.high FROM context_reliance c
           LEFT JOIN intervals i ON i.metric = 'context_reliance' AND i.model = c.model
             AND i.perturbation = c.perturbation"""
    ).pl()
    effective = con.sql(
        """SELECT e.*, i.low, i.high FROM effective_accuracy e
           LEFT JOIN intervals i ON i.metric = 'effective_accuracy' AND i.model = e.model
             AND i.perturbation = e.perturbation"""
    ).pl()
    return {
        "context_table1": paper_table1(inputs, reliance, effective),
        "context_table2": paper_table2(inputs, reliance_k) if reliance_k is not None
        else pl.DataFrame(),
        "context_findings": findings if findings is not None
        else pl.DataFrame(schema=FINDING_SCHEMA),
    }  # fmt: skip


def _context_figures(context: dict[str, pl.DataFrame]) -> dict[str, plt.Figure]:
    reliance = context["context_reliance"]
    examples = context["examples_png"]
    return {
        "context_reliance": fig.context_reliance(reliance, context["effective_accuracy"])
        if reliance.height else fig.placeholder("No context swaps in this run."),
        "context_flips": fig.context_flips(examples)
        if examples.height else fig.placeholder("No swap changed a correct answer."),
    }  # fmt: skip


def _context_context(context: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The SwapMix section: reliance per swap kind and effective accuracy; None without
    context swaps."""
    reliance = context["context_reliance"]
    if not reliance.height:
        return None
    effective = (
        context["effective_accuracy"]
        .filter(pl.col("perturbation") == "all")
        .select("model", "n_questions", "n_swapped", "accuracy", "effective_accuracy")
    )
    from vqarobust.metrics.context_paper import finding_sentence

    findings = context["context_findings"]
    return {"reliance": reliance.pivot(on="perturbation", index="model", values="reliance"),
            "effective": effective, "examples": context["context_examples"],
            "table1": context["context_table1"], "table2": context["context_table2"],
            "findings": [finding_sentence(r) for r in findings.iter_rows(named=True)]}  # fmt: skip


def _interval_note(s: Summary) -> str:
    if not s.resamples:
        return "No intervals: the run had uncertainty.resamples: 0."
    unit = "images" if s.cluster == "image" else "questions"
    return (
        f"Brackets: {s.level:.0%} percentile intervals over {s.resamples:,} bootstrap "
        f"resamples of the {unit} (the same resamples for every model and subset, so "
        "differences are paired); rank shares: how often the model holds its rank."
    )


def _uncertainty_side(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """Intervals, comparisons, rank shares, drop tests and effective robustness."""
    return {
        "intervals": con.sql("SELECT * FROM intervals").pl(),
        "model_comparisons": con.sql("SELECT * FROM model_comparisons ORDER BY ALL").pl(),
        "rank_stability": con.sql("SELECT * FROM rank_stability ORDER BY ALL").pl(),
        "drop_tests": con.sql("SELECT * FROM drop_tests ORDER BY ALL").pl(),
        "effective_robustness": con.sql(
            "SELECT * FROM effective_robustness ORDER BY modality, perturbation, model"
        ).pl(),
        "vre_bounds": con.sql(
            """SELECT v.model, v.vre, i.low, i.high FROM vre_model v
               LEFT JOIN intervals i ON i.metric = 'vre_model' AND i.model = v.model
                 AND i.modality = v.modality
               WHERE v.modality = 'image'"""
        ).pl(),
        "models": con.sql("SELECT DISTINCT model FROM predictions ORDER BY model").pl(),
    }


def _uncertainty_figures(u: dict[str, pl.DataFrame], level: float) -> dict[str, plt.Figure]:
    ranks = u["rank_stability"].filter(pl.col("modality") == "image")
    fit = u["effective_robustness"].filter(pl.col("perturbation") == "all")
    n_models = u["models"].height
    return {
        "vre_intervals": fig.vre_intervals(u["vre_bounds"], ranks, level)
        if u["vre_bounds"].height else fig.placeholder("No VRE in this run."),
        "effective_robustness": fig.effective_robustness(fit) if fit.height
        else fig.placeholder(_no_fit_reason(n_models)),
    }  # fmt: skip


def _no_fit_reason(n_models: int) -> str:
    from vqarobust.metrics.uncertainty import MIN_MODELS_FOR_FIT

    return (
        f"No effective robustness: it fits perturbed against clean accuracy across the "
        f"models, which needs at least {MIN_MODELS_FOR_FIT}; this run has {n_models}."
    )


def _uncertainty_context(u: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """The "Uncertainty and significance" section: model differences, rank shares, the
    drop tests' counts and non-significant cells, effective robustness."""
    comparisons = u["model_comparisons"]
    ranks = u["rank_stability"]
    tests = u["drop_tests"]
    eff = u["effective_robustness"].filter(pl.col("perturbation") == "all")
    out: dict[str, Any] = {
        "comparisons": comparisons.select(
            "modality", "metric", "model_a", "model_b",
            pl.col("difference").alias("difference a - b"), "low", "high", "se",
            "distinguishable") if comparisons.height else None,
        "ranks": ranks.with_columns(pl.format("rank {}", "rank").alias("rank"))
        .pivot(on="rank", index=["modality", "model"], values="share") if ranks.height else None,
        "effective": eff.drop("perturbation") if eff.height else None,
        "no_fit_reason": _no_fit_reason(u["models"].height),
        "tests": None,
    }  # fmt: skip
    if tests.height:
        counts = tests.group_by("modality", "test").agg(
            pl.len().alias("cells"), pl.col("significant").sum().alias("significant drops"),
            (~pl.col("significant")).sum().alias("not significant"),
        ).sort("modality", "test")  # fmt: skip
        weak = tests.filter(~pl.col("significant")).select(
            "model", "modality", "perturbation", "severity", "n_worse", "n_better",
            "mean_difference", "p_value", "p_adjusted")  # fmt: skip
        adjust = {"holm": "Holm", "bh": "Benjamini-Hochberg"}.get(tests["adjust"][0], "")
        out["tests"] = {"counts": counts, "weak": weak, "adjust": adjust,
                        "n_cells": tests.height}  # fmt: skip
    return out

"""The headline numbers of a run, read from its DuckDB file, as text or Markdown.

The README's "result of the default run" block is this module's Markdown output for the
default run (``vqarobust summary results/easy-vqa/robustness.duckdb --markdown``), so the
numbers a reader sees are the numbers the code produced.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import duckdb
import polars as pl

# How many of the strongest and weakest corruptions the summary names.
N_NAMED = 4
# A question type is named weakest for a corruption only with this many questions.
MIN_TYPE_QUESTIONS = 20


@dataclass(frozen=True)
class Summary:
    """Per-model headline numbers and the corruption ranking of one run.

    Every number ``x`` of ``models``, ``corruptions``, ``questions`` and ``context`` comes
    with ``x_low`` and ``x_high``, the bounds of its bootstrap interval (null when the run
    had ``uncertainty.resamples: 0``)."""

    # model, clean, corrupted, relative_drop, vre, rank, rank_share (+ bounds)
    models: pl.DataFrame
    corruptions: pl.DataFrame  # corruption, vre, aggregated_drop (+ bounds), strongest first
    n_images: int
    n_questions: int
    metric: str
    # model, text VRE, MMI per modality, mean R_score per ranker (empty without text rows)
    questions: pl.DataFrame | None = None
    rscore: tuple[float, float] | None = None  # R_score tolerance t and maximum m
    # model, clean accuracy, reliance per swap kind, effective accuracy (None without swaps)
    context: pl.DataFrame | None = None
    comparisons: pl.DataFrame | None = None  # model_comparisons of VRE on the image side
    level: float = 0.95  # coverage of the intervals
    cluster: str = "image"  # resampling unit
    resamples: int = 0
    reliance: pl.DataFrame | None = None  # model, ratio, uses_image_little (blank control)
    skipped: pl.DataFrame | None = None  # perturbation, reason
    context_comparisons: pl.DataFrame | None = None  # model_comparisons of context reliance
    # With one model: its unscaled image sub-metrics per corruption (+ bounds), since VRE
    # scaled over one model says nothing about it; None with two models or more.
    unscaled: pl.DataFrame | None = None
    # corruption, question_type, accuracy: the weakest type per image corruption (mean over
    # the models, severities 1..), types with MIN_TYPE_QUESTIONS questions or more
    weakest_types: pl.DataFrame | None = None
    # The SwapMix paper's Table 2 layout (reliance per swap kind at each k) and its
    # findings (perfect sight vs detector, SwapMix vs plain); None in older databases.
    context_k: pl.DataFrame | None = None
    context_findings: pl.DataFrame | None = None


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables of a results database (older databases lack the newer ones)."""
    return {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def _bounds(alias: str, metric: str, where: str) -> str:
    return (f"LEFT JOIN intervals {alias} ON {alias}.metric = '{metric}' AND {where}")  # fmt: skip


def summarize(db_path: str | os.PathLike[str]) -> Summary:
    """Read the headline numbers of a results database."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        models = con.sql(
            f"""WITH m AS (
                   SELECT v.model, v.clean_accuracy AS clean, c.corrupted,
                          CASE WHEN v.clean_accuracy > 0
                               THEN (v.clean_accuracy - c.corrupted) / v.clean_accuracy
                               ELSE 0 END AS relative_drop,
                          v.vre, rank() OVER (ORDER BY v.vre) AS rank
                   FROM vre_model v JOIN (
                       SELECT model, avg(accuracy) AS corrupted FROM (
                           SELECT model, perturbation, avg(accuracy) AS accuracy FROM accuracy
                           WHERE severity > 0 AND modality = 'image' AND perturbation IN (
                               SELECT perturbation FROM vre_corruption WHERE modality = 'image')
                           GROUP BY model, perturbation)
                       GROUP BY model) c USING (model)
                   WHERE v.modality = 'image')
               SELECT m.*, s.share AS rank_share,
                      a.low AS clean_low, a.high AS clean_high,
                      p.low AS corrupted_low, p.high AS corrupted_high,
                      d.low AS relative_drop_low, d.high AS relative_drop_high,
                      r.low AS vre_low, r.high AS vre_high
               FROM m
               {_bounds("a", "accuracy", "a.model = m.model AND a.modality = 'clean'")}
               {_bounds("p", "perturbed_accuracy", "p.model = m.model AND p.modality = 'image'")}
               {_bounds("d", "mmi", "d.model = m.model AND d.modality = 'image' AND d.key = 'all'")}
               {_bounds("r", "vre_model", "r.model = m.model AND r.modality = 'image'")}
               LEFT JOIN rank_stability s
                 ON s.modality = 'image' AND s.model = m.model AND s.rank = m.rank
               ORDER BY m.vre, m.model"""
        ).pl()
        corruptions = con.sql(
            f"""SELECT c.perturbation AS corruption, c.vre, r.low AS vre_low, r.high AS vre_high,
                      c.relative_drop AS aggregated_drop
               FROM vre_corruption c
               {_bounds("r", "vre_perturbation",
                        "r.modality = 'image' AND r.perturbation = c.perturbation")}
               WHERE c.modality = 'image' ORDER BY c.vre DESC, corruption"""
        ).pl()  # fmt: skip
        n_images, n_questions = con.execute(
            "SELECT count(DISTINCT image_id), count(*) FROM questions"
        ).fetchone()
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        questions = _question_side(con)
        context = _context_side(con)
        rscore = con.execute("SELECT any_value(tolerance), any_value(maximum) FROM rscore")
        t, m = rscore.fetchall()[0]
        comparisons = con.sql(
            "SELECT * FROM model_comparisons WHERE modality = 'image' AND metric = 'vre'"
        ).pl()
        reliance = con.sql(
            f"""SELECT r.model, r.ratio, i.low AS ratio_low, i.high AS ratio_high,
                       r.uses_image_little
                FROM image_reliance r
                {_bounds("i", "image_reliance_ratio",
                         "i.model = r.model AND i.perturbation = r.control")}
                WHERE r.control = 'blank' ORDER BY r.model"""
        ).pl()  # fmt: skip
        skipped = con.sql("SELECT * FROM skipped_perturbations ORDER BY perturbation").pl()
        context_pairs = con.sql(
            "SELECT * FROM model_comparisons WHERE modality = 'context' "
            "AND metric = 'context_reliance' ORDER BY model_a, model_b"
        ).pl()
        unscaled = _unscaled(con) if models.height == 1 else None
        weakest = _weakest_types(con)
        context_k, findings = _context_paper(con)
    unc = json.loads(info.get("uncertainty", "{}"))
    return Summary(models, corruptions, n_images, n_questions, info["metric"], questions, (t, m),
                   context, comparisons, float(unc.get("level", 0.95)),
                   str(unc.get("cluster", "image")), int(unc.get("resamples", 0)), reliance,
                   skipped, context_pairs, unscaled, weakest, context_k, findings)  # fmt: skip


def _weakest_types(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per image corruption of the VRE tables, the question type with the lowest mean
    accuracy over the models (ties: the first type alphabetically)."""
    from vqarobust.analyses.accuracy import ALL_MODELS

    if "question_type_perturbation" not in table_names(con):
        return None
    return con.sql(
        f"""SELECT corruption, question_type, accuracy FROM (
                SELECT q.perturbation AS corruption, q.question_type, q.accuracy,
                       row_number() OVER (PARTITION BY q.perturbation
                                          ORDER BY q.accuracy, q.question_type) AS k
                FROM question_type_perturbation q
                WHERE q.model = '{ALL_MODELS}' AND q.modality = 'image'
                  AND q.perturbation IN (
                      SELECT perturbation FROM vre_corruption WHERE modality = 'image')
                  AND q.question_type IN (
                      SELECT question_type FROM questions GROUP BY ALL
                      HAVING count(*) >= {MIN_TYPE_QUESTIONS}))
            WHERE k = 1 ORDER BY corruption"""
    ).pl()


def _unscaled(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The five sub-metrics, unscaled, per image corruption (one model), with bounds."""
    from vqarobust.metrics.robustness import METRIC_NAMES

    cols = ", ".join(METRIC_NAMES)
    long = con.sql(
        f"""WITH s AS (UNPIVOT (SELECT perturbation, {cols} FROM submetrics
                                WHERE modality = 'image')
                       ON {cols} INTO NAME col VALUE v)
            SELECT s.perturbation AS model, s.col, 0 AS k, s.v, i.low, i.high
            FROM s LEFT JOIN intervals i
              ON i.metric = s.col AND i.modality = 'image' AND i.perturbation = s.perturbation"""
    ).pl()
    wide = _wide(long).rename({"model": "corruption"})
    order = [c for name in METRIC_NAMES for c in (name, f"{name}_low", f"{name}_high")]
    return wide.select("corruption", *order)


def _context_paper(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame | None, ...]:
    """The Table 2 layout and the findings of the SwapMix paper (docs/context.md)."""
    from vqarobust.metrics.context_paper import paper_table2

    tables = table_names(con)
    if "context_reliance_k" not in tables or "model_inputs" not in tables:
        return None, None
    table2 = paper_table2(con.sql("SELECT * FROM model_inputs").pl(),
                          con.sql("SELECT * FROM context_reliance_k").pl())  # fmt: skip
    findings = (con.sql("SELECT * FROM context_findings ORDER BY ALL").pl()
                if "context_findings" in tables else None)  # fmt: skip
    return (table2 if table2.height else None), findings


def _context_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per model: clean accuracy, context reliance per swap kind and effective accuracy
    (all swaps), each with its bounds; None when the run has no context swaps."""
    if not con.execute("SELECT count(*) FROM context_reliance").fetchall()[0][0]:
        return None
    long = con.sql(
        f"""SELECT e.model, 'clean accuracy' AS col, 0 AS k, e.accuracy AS v,
                   a.low, a.high
            FROM effective_accuracy e
            {_bounds("a", "accuracy", "a.model = e.model AND a.modality = 'clean'")}
            WHERE e.perturbation = 'all'
            UNION ALL
            SELECT c.model, 'reliance ' || replace(c.perturbation, 'swap_', ''),
                   CASE WHEN c.perturbation = 'all' THEN 1 ELSE 2 END, c.reliance, i.low, i.high
            FROM context_reliance c
            {_bounds("i", "context_reliance",
                     "i.model = c.model AND i.perturbation = c.perturbation")}
            UNION ALL
            SELECT e.model, 'effective accuracy', 3, e.effective_accuracy, i.low, i.high
            FROM effective_accuracy e
            {_bounds("i", "effective_accuracy",
                     "i.model = e.model AND i.perturbation = e.perturbation")}
            WHERE e.perturbation = 'all'"""
    ).pl()  # fmt: skip
    return _wide(long)


def _wide(long: pl.DataFrame) -> pl.DataFrame:
    """(model, col, k, v, low, high) rows -> one row per model, columns ordered by (k, col),
    each ``col`` with ``col_low`` and ``col_high`` beside it."""
    order = long.select("col", "k").unique().sort("k", "col")["col"].to_list()
    out = long.select("model").unique().sort("model")
    for col in order:
        part = long.filter(pl.col("col") == col).select(
            "model", pl.col("v").alias(col), pl.col("low").alias(f"{col}_low"),
            pl.col("high").alias(f"{col}_high"),
        )  # fmt: skip
        out = out.join(part, on="model", how="left")
    return out


def _question_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per model: VRE over text perturbations, MMI per modality and the mean R_score over
    the basic-question levels of each ranker, with bounds; None without a question side."""
    has = con.execute(
        "SELECT count(*) FROM accuracy WHERE modality IN ('text', 'basic_question')"
    ).fetchall()[0][0]
    if not has:
        return None
    group = 'm."group"'
    mmi_order = f"CASE {group} WHEN 'image' THEN 1 WHEN 'text' THEN 2 WHEN 'all' THEN 3 ELSE 4 END"
    mmi_bounds = _bounds("i", "mmi", "i.model = m.model AND i.modality = 'all' AND "
                         f"i.key = 'modality' AND i.perturbation = {group}")  # fmt: skip
    long = con.sql(
        f"""SELECT v.model, 'text VRE' AS col, 0 AS k, v.vre AS v, i.low, i.high
            FROM vre_model v
            {_bounds("i", "vre_model", "i.model = v.model AND i.modality = 'text'")}
            WHERE v.modality = 'text'
            UNION ALL
            SELECT m.model, 'MMI ' || replace(m."group", '_', ' '), {mmi_order}, m.mmi,
                   i.low, i.high
            FROM mmi m
            {mmi_bounds}
            WHERE m.scope = 'modality'
            UNION ALL
            SELECT r.model, 'R_score ' || r.perturbation, 5, r.r, i.low, i.high
            FROM (SELECT model, perturbation, avg(rscore) AS r FROM rscore
                  WHERE modality = 'basic_question' AND perturbation <> 'all'
                  GROUP BY ALL) r
            {_bounds("i", "rscore_mean", "i.model = r.model AND i.modality = 'basic_question' "
                     "AND i.perturbation = r.perturbation")}"""
    ).pl()  # fmt: skip
    return _wide(long)


def with_interval(value: float | None, low: float | None, high: float | None) -> str:
    """``0.496 [0.471, 0.519]``, or the value alone when it has no interval."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if low is None or high is None:
        return _fixed(value)
    return f"{_fixed(value)} [{_fixed(low)}, {_fixed(high)}]"


def _fixed(v: float) -> str:
    """Three decimals, without a "-0.000" for a value that rounds to zero."""
    return f"{0.0 if abs(v) < 0.0005 else v:.3f}"


def interval_columns(df: pl.DataFrame) -> pl.DataFrame:
    """A frame of numbers with ``_low``/``_high`` bounds as one text column per number."""
    bounds = {c for c in df.columns if c.endswith(("_low", "_high"))}
    cols = {}
    for c in df.columns:
        if c in bounds:
            continue
        if f"{c}_low" in df.columns:
            cols[c] = [with_interval(v, lo, hi) for v, lo, hi in
                       zip(df[c], df[f"{c}_low"], df[f"{c}_high"], strict=True)]  # fmt: skip
        else:
            cols[c] = df[c].to_list()
    return pl.DataFrame(cols, strict=False)


def _named(df: pl.DataFrame) -> str:
    return ", ".join(f"{c} ({with_interval(v, lo, hi)})" for c, v, lo, hi in
                     df.select("corruption", "vre", "vre_low", "vre_high").iter_rows())  # fmt: skip


def markdown_table(df: pl.DataFrame) -> list[str]:
    """Lines of a Markdown table, floats to 3 decimals."""
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    for row in df.iter_rows():
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


HEADLINE_COLUMNS = ("model", "clean accuracy", "mean corrupted accuracy", "relative drop", "VRE",
                    "VRE rank (share of resamples)")  # fmt: skip


def _rank(s: Summary, rank: int, share: float | None) -> str:
    if s.models.height < 2:
        return "n/a"
    return f"{rank}" if share is None else f"{rank} ({share:.0%})"


# Said wherever the image side would be: a run may have none (GQA read without images,
# or released features, which are of the clean images only).
NO_IMAGE_SIDE = ("No image perturbations in this run, so there is no image-side VRE; the "
                 "question side and the context study are below.")  # fmt: skip


def headline_table(s: Summary) -> pl.DataFrame:
    """The per-model headline table, every number with its interval, as text cells."""
    m = s.models
    if m.is_empty():
        return pl.DataFrame(schema=dict.fromkeys(HEADLINE_COLUMNS, pl.String))
    rows = {
        "model": m["model"].to_list(),
        "clean accuracy": interval_columns(m.select("clean", "clean_low", "clean_high"))["clean"],
        "mean corrupted accuracy": interval_columns(
            m.select("corrupted", "corrupted_low", "corrupted_high"))["corrupted"],
        "relative drop": interval_columns(m.select(
            "relative_drop", "relative_drop_low", "relative_drop_high"))["relative_drop"],
        "VRE": interval_columns(m.select("vre", "vre_low", "vre_high"))["vre"],
        "VRE rank (share of resamples)": [_rank(s, r, sh) for r, sh in
                                          m.select("rank", "rank_share").iter_rows()],
    }  # fmt: skip
    assert list(rows) == list(HEADLINE_COLUMNS)
    if m.height < 2:
        # VRE scales over the models: one model's VRE measures nothing about it.
        del rows["VRE"], rows["VRE rank (share of resamples)"]
    return pl.DataFrame(rows)


def notes(s: Summary) -> list[str]:
    """The sentences under the headline table: what the numbers are, which model is more
    robust than which (only where the data says so), the image-reliance caveat, the
    strongest and weakest corruptions, and what the run skipped."""
    # The sentences live with the report sections that show their tables; imported here,
    # as the sections import this module.
    from vqarobust.analyses.accuracy import IMAGE_RELIANCE_RATIO
    from vqarobust.report.sections.figures import weakest_types_sentence
    from vqarobust.report.sections.summary import reliance_sentence
    from vqarobust.report.sections.uncertainty import comparison_sentences

    if s.resamples:
        unit = "images" if s.cluster == "image" else "questions"
        iv = (
            f"Brackets: {s.level:.0%} percentile intervals over {s.resamples:,} bootstrap "
            f"resamples of the {unit}, the same resamples for every model and subset."
        )
    else:
        iv = "No intervals (uncertainty.resamples: 0)."
    if s.models.is_empty():
        out = [f"{s.n_images:,} images, {s.n_questions:,} questions, score `{s.metric}`. {iv} "
               + NO_IMAGE_SIDE]  # fmt: skip
        if s.skipped is not None and s.skipped.height:
            items = "; ".join(f"{p} ({r})" for p, r in s.skipped.iter_rows())
            out.append(f"Skipped in this run: {items}.")
        return out
    out = [
        f"{s.n_images:,} images, {s.n_questions:,} questions, score `{s.metric}`. {iv} Mean "
        "corrupted accuracy = mean over the corruptions of each one's mean over severities "
        "1-5; relative drop = "
        "(clean - mean corrupted) / clean (MMI of the image side). Lower VRE and relative "
        "drop = more robust; VRE rank 1 = lowest VRE, with the share of resamples in which "
        "the model holds that rank.",
    ]
    if s.models.height < 2:
        out.append(
            "One model: VRE min-max scales each sub-metric over the models and corruptions, "
            "so over one model it only weighs the corruptions against each other (its "
            "scaled sub-metrics span 0 to 1 by construction) and says nothing of the "
            "model's robustness; no VRE and no rank are given. Its unscaled sub-metrics per "
            "corruption are below."
        )
    out += comparison_sentences(s.models, s.comparisons, s.level)
    caveat = reliance_sentence(s.reliance, IMAGE_RELIANCE_RATIO)
    if caveat:
        out.append(caveat)
    k = min(N_NAMED, max(1, s.corruptions.height // 2))
    out.append(
        f"Strongest corruptions (highest VRE over the models): {_named(s.corruptions.head(k))}; "
        f"weakest: {_named(s.corruptions.tail(k).reverse())}."
    )
    weakest = weakest_types_sentence(s.weakest_types, MIN_TYPE_QUESTIONS)
    if weakest:
        out.append(weakest)
    if s.skipped is not None and s.skipped.height:
        items = "; ".join(f"{p} ({r})" for p, r in s.skipped.iter_rows())
        out.append(f"Skipped in this run: {items}.")
    return out


def to_markdown(s: Summary, command: str) -> str:
    """The summary as a Markdown block (tables plus sentences); ``command`` made it."""
    from vqarobust.report.sections.context import context_sentences  # see notes()

    lines = [f"<!-- generated by `{command}`; do not edit by hand -->"]
    if not s.models.is_empty():
        lines += [*markdown_table(headline_table(s)), ""]
    lines += notes(s)
    if s.unscaled is not None and s.unscaled.height:
        lines += ["", *markdown_table(interval_columns(s.unscaled)), "",
                  "Unscaled sub-metrics of the one model per corruption (docs/metrics.md): "
                  "lower = more robust for each."]  # fmt: skip
    if s.questions is not None and s.questions.height:
        lines += ["", *markdown_table(interval_columns(s.questions))]
        t, m = s.rscore or (float("nan"), float("nan"))
        lines += [
            "",
            "Question side: VRE over the text perturbations (scaled over their own matrix), "
            "MMI per modality (relative drop from clean, each perturbation weighing the same; "
            "`all` = image and text together; lower = more robust), and R_score averaged "
            "over the basic-question "
            f"levels per ranker (t = {t:g}, m = {m:g} points; higher = more robust).",
        ]
    if s.context is not None and s.context.height:
        lines += ["", *markdown_table(interval_columns(s.context))]
        lines += [
            "",
            "Context (SwapMix): reliance = share of correctly answered questions whose "
            "answer changes when an object they do not depend on is swapped (lower = less "
            "reliant); effective accuracy = correct on the clean image and unchanged by every "
            "swap.",
            *context_sentences(s.context_comparisons, s.level),
        ]
        if s.context_k is not None:
            from vqarobust.metrics.context_paper import finding_sentence

            lines += ["", "Class and attribute reliance at each k (the SwapMix paper's Table 2; "
                      "kind: what the model reads):", "", *markdown_table(s.context_k)]  # fmt: skip
            findings = s.context_findings
            lines += ["", *(finding_sentence(r) for r in findings.iter_rows(named=True))] if (
                findings is not None and findings.height) else []  # fmt: skip
    return "\n".join(lines) + "\n"


def to_text(s: Summary) -> str:
    """The summary for a terminal."""
    with pl.Config(tbl_hide_dataframe_shape=True, float_precision=3, tbl_rows=50,
                   tbl_cols=20, fmt_str_lengths=40, tbl_width_chars=200):  # fmt: skip
        if s.models.is_empty():  # no image side
            out = "\n".join(notes(s)) + "\n"
        else:
            corr = interval_columns(s.corruptions)
            out = (f"{headline_table(s)}\n" + "\n".join(notes(s))
                   + f"\nCorruptions by VRE (strongest first):\n{corr}\n")  # fmt: skip
        if s.unscaled is not None:
            out += f"Unscaled sub-metrics per corruption:\n{interval_columns(s.unscaled)}\n"
        if s.questions is not None:
            out += f"Question side:\n{interval_columns(s.questions)}\n"
        if s.context is not None:
            out += f"Context:\n{interval_columns(s.context)}\n"
        return out

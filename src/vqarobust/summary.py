"""The headline numbers of a run, read from its DuckDB file, as text or Markdown.

The README's "result of the default run" block is this module's Markdown output for the
default run (``vqarobust summary results/easy-vqa/robustness.duckdb --markdown``), so the
numbers a reader sees are the numbers the code produced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import duckdb
import polars as pl

# How many of the strongest and weakest corruptions the summary names.
N_NAMED = 4


@dataclass(frozen=True)
class Summary:
    """Per-model headline numbers and the corruption ranking of one run."""

    models: pl.DataFrame  # model, clean, corrupted, relative_drop, vre, rank
    corruptions: pl.DataFrame  # corruption, vre, relative_drop (strongest first)
    n_images: int
    n_questions: int
    metric: str
    # model, text VRE, MMI per modality, mean R_score per ranker (empty without text rows)
    questions: pl.DataFrame | None = None
    rscore: tuple[float, float] | None = None  # R_score tolerance t and maximum m
    # model, clean accuracy, reliance per swap kind, effective accuracy (None without swaps)
    context: pl.DataFrame | None = None


def summarize(db_path: str | os.PathLike[str]) -> Summary:
    """Read the headline numbers of a results database."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        models = con.sql(
            """SELECT v.model, v.clean_accuracy AS clean, c.corrupted, v.relative_drop, v.vre,
                      rank() OVER (ORDER BY v.vre) AS rank
               FROM vre_model v JOIN (
                   SELECT model, avg(accuracy) AS corrupted FROM accuracy
                   WHERE severity > 0 AND modality = 'image' AND perturbation IN (
                       SELECT perturbation FROM vre_corruption WHERE modality = 'image')
                   GROUP BY model) c USING (model)
               WHERE v.modality = 'image'
               ORDER BY v.vre, v.model"""
        ).pl()
        corruptions = con.sql(
            "SELECT perturbation AS corruption, vre, relative_drop FROM vre_corruption "
            "WHERE modality = 'image' ORDER BY vre DESC, corruption"
        ).pl()
        n_images, n_questions = con.execute(
            "SELECT count(DISTINCT image_id), count(*) FROM questions"
        ).fetchone()
        metric = con.execute("SELECT value FROM run_info WHERE key = 'metric'").fetchone()[0]
        questions = _question_side(con)
        context = _context_side(con)
        rscore = con.execute("SELECT any_value(tolerance), any_value(maximum) FROM rscore")
        t, m = rscore.fetchall()[0]
    return Summary(models, corruptions, n_images, n_questions, metric, questions, (t, m),
                   context)  # fmt: skip


def _context_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per model: clean accuracy, context reliance per swap kind and effective accuracy
    (all swaps); None when the run has no context swaps."""
    if not con.execute("SELECT count(*) FROM context_reliance").fetchall()[0][0]:
        return None
    return con.sql(
        """WITH r AS (PIVOT (SELECT model, 'reliance ' || replace(perturbation, 'swap_', '')
                                    AS p, reliance FROM context_reliance)
                      ON p USING first(reliance))
           SELECT e.model, e.accuracy AS "clean accuracy", r.* EXCLUDE (model),
                  e.effective_accuracy AS "effective accuracy"
           FROM effective_accuracy e JOIN r USING (model)
           WHERE e.perturbation = 'all' ORDER BY e.model"""
    ).pl()


def _question_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per model: VRE over text perturbations, MMI per modality and the mean R_score over
    the basic-question levels of each ranker; None when the run has no question side."""
    has = con.execute(
        "SELECT count(*) FROM accuracy WHERE modality IN ('text', 'basic_question')"
    ).fetchall()[0][0]
    if not has:
        return None
    table = con.sql(
        """WITH m AS (PIVOT (SELECT model, 'MMI ' || replace("group", '_', ' ') AS g, mmi
                             FROM mmi WHERE scope = 'modality')
                      ON g USING first(mmi)),
                r AS (PIVOT (SELECT model, 'R_score ' || perturbation AS p, avg(rscore) AS r
                             FROM rscore WHERE modality = 'basic_question'
                               AND perturbation <> 'all' GROUP BY ALL)
                      ON p USING first(r)),
                v AS (SELECT model, vre AS "text VRE" FROM vre_model WHERE modality = 'text')
           SELECT * FROM v FULL JOIN m USING (model) FULL JOIN r USING (model)
           ORDER BY model"""
    ).pl()
    order = ["model", "text VRE", "MMI image", "MMI text", "MMI all", "MMI basic question"]
    return table.select(
        [c for c in order if c in table.columns] + [c for c in table.columns if c not in order]
    )


def _named(df: pl.DataFrame) -> str:
    return ", ".join(f"{c} ({v:.3f})" for c, v in df.select("corruption", "vre").iter_rows())


def markdown_table(df: pl.DataFrame) -> list[str]:
    """Lines of a Markdown table, floats to 3 decimals."""
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    for row in df.iter_rows():
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def to_markdown(s: Summary, command: str) -> str:
    """The summary as a Markdown block (table plus two sentences); ``command`` made it."""
    lines = [
        f"<!-- generated by `{command}`; do not edit by hand -->",
        "| model | clean accuracy | mean corrupted accuracy | relative drop | VRE | VRE rank |",
        "|---|---|---|---|---|---|",
    ]
    for m in s.models.iter_rows(named=True):
        lines.append(
            f"| {m['model']} | {m['clean']:.3f} | {m['corrupted']:.3f} | "
            f"{m['relative_drop']:.3f} | {m['vre']:.3f} | {m['rank']} |"
        )
    k = min(N_NAMED, max(1, s.corruptions.height // 2))
    lines += [
        "",
        f"{s.n_images:,} images, {s.n_questions:,} questions, score `{s.metric}`. Lower VRE "
        "and relative drop = more robust; rank 1 is the most robust model.",
        f"Strongest corruptions (highest VRE over the models): {_named(s.corruptions.head(k))}; "
        f"weakest: {_named(s.corruptions.tail(k).reverse())}.",
    ]
    if s.questions is not None and s.questions.height:
        lines += ["", *markdown_table(s.questions)]
        t, m = s.rscore or (float("nan"), float("nan"))
        lines += [
            "",
            "Question side: VRE over the text perturbations (scaled over their own matrix), "
            "MMI per modality (relative drop from clean; `all` = image and text sets "
            "together; lower = more robust), and R_score averaged over the basic-question "
            f"levels per ranker (t = {t:g}, m = {m:g} points; higher = more robust).",
        ]
    if s.context is not None and s.context.height:
        lines += ["", *markdown_table(s.context)]
        lines += [
            "",
            "Context (SwapMix): reliance = share of correctly answered questions whose "
            "answer changes when an object they do not depend on is swapped (lower = less "
            "reliant); effective accuracy = correct on the clean image and under every swap.",
        ]
    return "\n".join(lines) + "\n"


def to_text(s: Summary) -> str:
    """The summary for a terminal."""
    with pl.Config(tbl_hide_dataframe_shape=True, float_precision=3, tbl_rows=50):
        out = (
            f"{s.n_images} images, {s.n_questions} questions, score {s.metric}\n"
            f"{s.models}\nCorruptions by VRE (strongest first):\n{s.corruptions}\n"
        )
        if s.questions is not None:
            out += f"Question side:\n{s.questions}\n"
        return out

"""The "Question perturbations" section: text perturbations and basic-question noise
(VRE over text, MMI across modalities, R_score per level, ranker and dataset, level
control, VQABQ), example questions, truncation counts and the fidelity filter's drops."""

from __future__ import annotations

from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust import text as text_perturbations
from vqarobust.metrics.level_control import level_control, ranker_comparison
from vqarobust.report import figures as fig
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import bounds, table_names, wide
from vqarobust.text import ranking as bq

# Severities / levels whose perturbed questions the example table shows.
EXAMPLE_SEVERITIES = (1, 3, 5)
EXAMPLE_LEVELS = (1, 4, 7)
# The example question is the longest of the first this many.
EXAMPLE_CANDIDATES = 20
# The CSV files this section writes, each the frame of the same name.
TABLES = (
    "text_accuracy",
    "vre_text",
    "mmi_modalities",
    "rscore_basic_questions",
    "rscore_text",
    "question_examples",
    "truncated_questions",
    "rscore_datasets",
    "ranker_comparison",
)


def _optional(con: duckdb.DuckDBPyConnection, name: str, order: str) -> pl.DataFrame:
    """Table ``name`` sorted by ``order``; empty in a database written before it."""
    if name not in table_names(con):
        return pl.DataFrame()
    return con.sql(f"SELECT * FROM {name} {order}").pl()


def _rscore_datasets(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """R_score1 (general BQ dataset) and R_score2 (yes/no) per model and ranker: the
    R_score of the mean deterioration over the levels (table ``rscore_overall``), with
    its bootstrap interval."""
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
    info = pl.DataFrame(
        {
            "perturbation": names,
            "ranker": [bq.ranker_name(n) for n in names],
            "dataset": [bq.bq_dataset(n) for n in names],
        }
    )
    rows = rows.join(info, on="perturbation")
    out = rows.select("model", "ranker").unique().sort("model", "ranker")
    for dataset, label in (("general", "R_score1"), ("yes_no", "R_score2")):
        part = rows.filter(pl.col("dataset") == dataset)
        if not part.height:
            continue
        out = out.join(
            part.select(
                "model",
                "ranker",
                pl.col("acc_di").alias(f"{label} mean drop (pts)"),
                pl.col("rscore").alias(label),
                pl.col("low").alias(f"{label} low"),
                pl.col("high").alias(f"{label} high"),
            ),
            on=["model", "ranker"],
            how="left",
        )
    return out


def _ranker_comparison(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Level control per basic-question perturbation (:mod:`vqarobust.metrics.level_control`)
    from the accuracy table, most controllable first."""
    acc = con.sql(
        "SELECT model, perturbation, severity, accuracy FROM accuracy "
        "WHERE modality = 'basic_question'"
    ).pl()
    return ranker_comparison(level_control(acc))


def ranker_sentence(comparison: pl.DataFrame) -> str | None:
    """The sentence on the most level-controllable ranker (first row)."""
    ranked = comparison.filter(pl.col("spearman").is_not_null())
    if not ranked.height:
        return None
    best = ranked.row(0, named=True)
    return (
        f"The most level-controllable noise here comes from {best['perturbation']}: "
        f"accuracy's rank correlation with the level is {best['spearman']:.3f} (mean over "
        f"{best['models']} models), {best['non_rising']:.1%} of the steps from one level "
        f"to the next do not raise accuracy, and accuracy falls by "
        f"{best['first_to_last']:.3f} from the first level to the last."
    )


def _question_examples(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One question (the longest of the first 20) under every text perturbation at
    severities 1, 3, 5 and every ranker at levels 1, 4, 7."""
    sets = con.sql(
        "SELECT question_id, original, perturbation, severity, perturbed AS question "
        "FROM question_sets WHERE question_id IN (SELECT DISTINCT question_id FROM "
        "question_sets WHERE question_id IN (SELECT question_id FROM questions) "
        f"ORDER BY question_id LIMIT {EXAMPLE_CANDIDATES})"
    ).pl()
    if not sets.height:
        return pl.DataFrame(
            schema={"perturbation": pl.String, "severity": pl.Int16, "question": pl.String}
        )
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
        schema={"perturbation": pl.String, "severity": pl.Int16, "question": pl.String},
    )
    picked = rows.filter(shown).select("perturbation", "severity", "question")
    return pl.concat([original, picked.sort("perturbation", "severity")])


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """The tables of the question side: text accuracy, VRE over text perturbations, MMI
    across modalities, R_score per basic-question level, dataset and text perturbation,
    level control, VQABQ, example questions, truncation counts, skips and drops."""
    del run
    return {
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
        "rankers": ranker_methods(con),
        "vqabq_scores": _optional(con, "vqabq_scores", ""),
        "vqabq": _optional(con, "vqabq", "ORDER BY split, model"),
        "vqabq_counts": _optional(con, "vqabq_counts", "ORDER BY split, n_bq"),
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
        "fidelity_drops": _optional(con, "fidelity_drops", "ORDER BY ALL"),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """The frames of :data:`TABLES` (long tables; the page shows some of them wide)."""
    return {name: data[name] for name in TABLES}


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """Error vs text-perturbation severity, MMI image vs text, R_score per level."""
    del run
    text = data["text_accuracy"]
    registered = set(text_perturbations.names())
    text_families = {
        p: text_perturbations.level(p) if p in registered else "other"
        for p in text["perturbation"].unique()
    }
    has_text = text.filter(pl.col("severity") > 0).height > 0
    levels = data["rscore_basic_questions"]
    return {
        "text_error_vs_severity": fig.error_vs_severity(text, text_families)
        if has_text
        else fig.placeholder("No text perturbations in this run."),
        "mmi_modalities": fig.mmi_modalities(data["mmi_long"])
        if data["mmi_long"].height
        else fig.placeholder("No modality to compare."),
        "rscore_basic_questions": fig.rscore_levels(
            levels.rename({"level": "severity"}).with_columns(
                pl.col("ranker").str.replace("^ynbq_(.*)$", "${1} (yes/no)").str.strip_prefix("bq_")
            )
        )
        if levels.height
        else fig.placeholder("No basic-question noise in this run."),
    }


def _levels_wide(rscore: pl.DataFrame) -> pl.DataFrame:
    """R_score with one column per basic-question level (the CSV keeps the long table)."""
    if not rscore.height:
        return rscore
    wide = rscore.pivot(on="level", index=["model", "ranker"], values="rscore")
    return wide.select("model", "ranker", *sorted(wide.columns[2:], key=int)).sort(
        "model", "ranker"
    )


def context(data: Data, run: Run) -> dict[str, Any] | None:
    """The section's tables and warnings; None when the run perturbed no question."""
    del run
    skipped, drops = data["skipped_perturbations"], data["fidelity_drops"]
    has_text = data["text_accuracy"].filter(pl.col("severity") > 0).height > 0
    levels = data["rscore_basic_questions"]
    if not (has_text or levels.height or skipped.height or drops.height or data["vqabq"].height):
        return None
    dropped = int(drops["n_dropped"].sum()) if drops.height else 0
    return {
        "skipped": {"n": skipped.height, "table": skipped.sort("perturbation")}
        if skipped.height
        else None,
        "drops": {"n": dropped, "n_sets": int((drops["n_dropped"] > 0).sum()), "table": drops}
        if dropped
        else None,
        "vre_text": data["vre_text"],
        "mmi_modalities": data["mmi_modalities"],
        "rscore_text": data["rscore_text"],
        "levels": _levels_wide(levels),
        "datasets": data["rscore_datasets"],
        "ranker_methods": data["rankers"],
        "rankers": data["ranker_comparison"],
        "ranker_sentence": ranker_sentence(data["ranker_comparison"]),
        "vqabq_scores": data["vqabq_scores"],
        "vqabq": data["vqabq"],
        "vqabq_counts": data["vqabq_counts"],
        "examples": data["question_examples"],
        "truncated_totals": data["truncated_totals"],
        "truncated": data["truncated_questions"],
    }


def question_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per model: VRE over text perturbations, MMI per modality and the mean R_score over
    the basic-question levels of each ranker, with bounds; None without a question side."""
    has = con.execute(
        "SELECT count(*) FROM accuracy WHERE modality IN ('text', 'basic_question')"
    ).fetchall()[0][0]
    if not has:
        return None
    group = 'm."group"'
    mmi_order = f"CASE {group} WHEN 'image' THEN 1 WHEN 'text' THEN 2 WHEN 'all' THEN 3 ELSE 4 END"
    mmi_bounds = bounds(
        "i",
        "mmi",
        "i.model = m.model AND i.modality = 'all' AND "
        f"i.key = 'modality' AND i.perturbation = {group}",
    )
    long = con.sql(
        f"""SELECT v.model, 'text VRE' AS col, 0 AS k, v.vre AS v, i.low, i.high
            FROM vre_model v
            {bounds("i", "vre_model", "i.model = v.model AND i.modality = 'text'")}
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
            {
            bounds(
                "i",
                "rscore_mean",
                "i.model = r.model AND i.modality = 'basic_question' "
                "AND i.perturbation = r.perturbation",
            )
        }"""
    ).pl()
    return wide(long)


def ranker_methods(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """How each basic-question perturbation was ranked (the R_score tables' ``ranking``
    column: LASSO's mode and settings, BLEU's smoothing, the encoder); empty in a
    database written before the column."""
    columns = {r[0] for r in con.execute("DESCRIBE rscore").fetchall()}
    if "ranking" not in columns:
        return pl.DataFrame(schema={"ranker": pl.String, "ranking": pl.String})
    return con.sql(
        "SELECT DISTINCT perturbation AS ranker, ranking FROM rscore "
        "WHERE modality = 'basic_question' AND perturbation <> 'all' ORDER BY ranker"
    ).pl()


def rankers_sentence(methods: pl.DataFrame | None) -> str | None:
    """ "Ranked by: bq_lasso: LASSO, fast mode: ...; bq_cosine: ...", or None."""
    if methods is None or not methods.height:
        return None
    items = "; ".join(f"`{r}`: {m}" for r, m in methods.iter_rows())
    return f"Basic questions ranked by: {items}."


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """The question side per model, R_score's tolerance and maximum, and how each
    basic-question perturbation was ranked."""
    t, m = con.execute("SELECT any_value(tolerance), any_value(maximum) FROM rscore").fetchall()[0]
    return {"questions": question_side(con), "rscore": (t, m), "rankers": ranker_methods(con)}


SECTION = Section(
    "questions",
    ("scoring", "accuracy", "robustness", "uncertainty", "vqabq"),
    context,
    read,
    figures,
    tables,
    summary,
)

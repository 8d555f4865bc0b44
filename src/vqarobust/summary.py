"""The headline numbers of a run, read from its DuckDB file, as text or Markdown.

The README's "result of the default run" block is this module's Markdown output for the
default run (``vqarobust summary results/easy-vqa/robustness.duckdb --markdown``), so the
numbers a reader sees are the numbers the code produced.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import duckdb
import polars as pl

# How many of the strongest and weakest corruptions the summary names.
N_NAMED = 4


@dataclass(frozen=True)
class Summary:
    """Per-model headline numbers and the corruption ranking of one run.

    Every number ``x`` of ``models``, ``corruptions``, ``questions`` and ``context`` comes
    with ``x_low`` and ``x_high``, the bounds of its bootstrap interval (null when the run
    had ``uncertainty.resamples: 0``)."""

    # model, clean, corrupted, relative_drop, vre, rank, rank_share (+ bounds)
    models: pl.DataFrame
    corruptions: pl.DataFrame  # perturbation, vre, aggregated_drop (+ bounds), strongest first
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
    # perturbation, question_type, accuracy: the weakest type per image corruption (mean over
    # the models, severities 1..), types with figures.MIN_TYPE_QUESTIONS questions or more
    weakest_types: pl.DataFrame | None = None
    # The SwapMix paper's Table 2 layout (reliance per swap kind at each k) and its
    # findings (perfect sight vs detector, SwapMix vs plain); None in older databases.
    context_k: pl.DataFrame | None = None
    context_findings: pl.DataFrame | None = None
    # The warning when the run's package versions differ from the checkout's lock.
    environment: str | None = None
    # ranker, ranking: how each basic-question perturbation was ranked (LASSO's mode...)
    rankers: pl.DataFrame | None = None
    # The cells flagged for requests without the model's answer, as a sentence.
    unanswered: str | None = None


def summarize(db_path: str | os.PathLike[str]) -> Summary:
    """Read the headline numbers of a results database: each report section reads the
    :class:`Summary` fields its tables give (its ``summary``,
    :mod:`vqarobust.report.sections`)."""
    from vqarobust.report.sections import SECTIONS

    fields: dict[str, object] = {}
    with duckdb.connect(str(db_path), read_only=True) as con:
        for section in SECTIONS:
            fields.update(section.summary(con))
    return Summary(**fields)  # type: ignore[arg-type]


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables of a results database (older databases lack the newer ones)."""
    return {name for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def bounds(alias: str, metric: str, where: str) -> str:
    """A LEFT JOIN of table ``intervals`` as ``alias``: the bounds of ``metric`` where
    ``where`` holds (null bounds where the run computed none)."""
    return f"LEFT JOIN intervals {alias} ON {alias}.metric = '{metric}' AND {where}"


def wide(long: pl.DataFrame) -> pl.DataFrame:
    """(model, col, k, v, low, high) rows -> one row per model, columns ordered by (k, col),
    each ``col`` with ``col_low`` and ``col_high`` beside it."""
    order = long.select("col", "k").unique().sort("k", "col")["col"].to_list()
    out = long.select("model").unique().sort("model")
    for col in order:
        part = long.filter(pl.col("col") == col).select(
            "model",
            pl.col("v").alias(col),
            pl.col("low").alias(f"{col}_low"),
            pl.col("high").alias(f"{col}_high"),
        )
        out = out.join(part, on="model", how="left")
    return out


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
            cols[c] = [
                with_interval(v, lo, hi)
                for v, lo, hi in zip(df[c], df[f"{c}_low"], df[f"{c}_high"], strict=True)
            ]
        else:
            cols[c] = df[c].to_list()
    return pl.DataFrame(cols, strict=False)


def _named(df: pl.DataFrame) -> str:
    return ", ".join(
        f"{c} ({with_interval(v, lo, hi)})"
        for c, v, lo, hi in df.select("perturbation", "vre", "vre_low", "vre_high").iter_rows()
    )


def markdown_table(df: pl.DataFrame) -> list[str]:
    """Lines of a Markdown table, floats to 3 decimals."""
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    for row in df.iter_rows():
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


HEADLINE_COLUMNS = (
    "model",
    "clean accuracy",
    "mean corrupted accuracy",
    "relative drop",
    "VRE",
    "VRE rank (share of resamples)",
)


def _rank(s: Summary, rank: int, share: float | None) -> str:
    if s.models.height < 2:
        return "n/a"
    return f"{rank}" if share is None else f"{rank} ({share:.0%})"


# Said wherever the image side would be: a run may have none (GQA read without images,
# or released features, which are of the clean images only).
NO_IMAGE_SIDE = (
    "No image perturbations in this run, so there is no image-side VRE; the "
    "question side and the context study are below."
)


def headline_table(s: Summary) -> pl.DataFrame:
    """The per-model headline table, every number with its interval, as text cells."""
    m = s.models
    if m.is_empty():
        return pl.DataFrame(schema=dict.fromkeys(HEADLINE_COLUMNS, pl.String))
    rows = {
        "model": m["model"].to_list(),
        "clean accuracy": interval_columns(m.select("clean", "clean_low", "clean_high"))["clean"],
        "mean corrupted accuracy": interval_columns(
            m.select("corrupted", "corrupted_low", "corrupted_high")
        )["corrupted"],
        "relative drop": interval_columns(
            m.select("relative_drop", "relative_drop_low", "relative_drop_high")
        )["relative_drop"],
        "VRE": interval_columns(m.select("vre", "vre_low", "vre_high"))["vre"],
        "VRE rank (share of resamples)": [
            _rank(s, r, sh) for r, sh in m.select("rank", "rank_share").iter_rows()
        ],
    }
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
    from vqarobust.metrics.image_reliance import IMAGE_RELIANCE_RATIO
    from vqarobust.report.sections import figures
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
        out = [
            f"{s.n_images:,} images, {s.n_questions:,} questions, score `{s.metric}`. {iv} "
            + NO_IMAGE_SIDE
        ]
        if s.skipped is not None and s.skipped.height:
            items = "; ".join(f"{p} ({r})" for p, r in s.skipped.iter_rows())
            out.append(f"Skipped in this run: {items}.")
        return out + [x for x in (s.unanswered, s.environment) if x]
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
    weakest = figures.weakest_types_sentence(s.weakest_types, figures.MIN_TYPE_QUESTIONS)
    if weakest:
        out.append(weakest)
    if s.skipped is not None and s.skipped.height:
        items = "; ".join(f"{p} ({r})" for p, r in s.skipped.iter_rows())
        out.append(f"Skipped in this run: {items}.")
    return out + [x for x in (s.unanswered, s.environment) if x]


def to_markdown(s: Summary, command: str) -> str:
    """The summary as a Markdown block (tables plus sentences); ``command`` made it."""
    from vqarobust.report.sections.context import context_sentences  # see notes()

    lines = [f"<!-- generated by `{command}`; do not edit by hand -->"]
    if not s.models.is_empty():
        lines += [*markdown_table(headline_table(s)), ""]
    lines += notes(s)
    if s.unscaled is not None and s.unscaled.height:
        lines += [
            "",
            *markdown_table(interval_columns(s.unscaled)),
            "",
            "Unscaled sub-metrics of the one model per corruption (docs/metrics.md): "
            "lower = more robust for each.",
        ]
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
        from vqarobust.report.sections.questions import rankers_sentence  # see notes()

        ranked = rankers_sentence(s.rankers)
        if ranked:
            lines[-1] += " " + ranked
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

            lines += [
                "",
                "Class and attribute reliance at each k (the SwapMix paper's Table 2; "
                "kind: what the model reads):",
                "",
                *markdown_table(s.context_k),
            ]
            findings = s.context_findings
            lines += (
                ["", *(finding_sentence(r) for r in findings.iter_rows(named=True))]
                if (findings is not None and findings.height)
                else []
            )
    return "\n".join(lines) + "\n"


def to_text(s: Summary) -> str:
    """The summary for a terminal."""
    with pl.Config(
        tbl_hide_dataframe_shape=True,
        float_precision=3,
        tbl_rows=50,
        tbl_cols=20,
        fmt_str_lengths=40,
        tbl_width_chars=200,
    ):
        if s.models.is_empty():  # no image side
            out = "\n".join(notes(s)) + "\n"
        else:
            corr = interval_columns(s.corruptions)
            out = (
                f"{headline_table(s)}\n"
                + "\n".join(notes(s))
                + f"\nCorruptions by VRE (strongest first):\n{corr}\n"
            )
        if s.unscaled is not None:
            out += f"Unscaled sub-metrics per corruption:\n{interval_columns(s.unscaled)}\n"
        if s.questions is not None:
            out += f"Question side:\n{interval_columns(s.questions)}\n"
        if s.context is not None:
            out += f"Context:\n{interval_columns(s.context)}\n"
        return out

"""The "Visual context (SwapMix)" section: context reliance per model and swap kind,
effective accuracy, the SwapMix paper's Table 1 and Table 2 layouts and findings, and the
swaps that changed a correct answer."""

from __future__ import annotations

from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.metrics.context_paper import (
    FINDING_SCHEMA,
    finding_sentence,
    paper_table1,
    paper_table2,
)
from vqarobust.metrics.uncertainty import family_note
from vqarobust.report import figures as fig
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.summary import bounds, table_names, wide, with_interval

# The CSV files this section writes, each the frame of the same name.
TABLES = (
    "context_reliance",
    "effective_accuracy",
    "context_examples",
    "context_table1",
    "context_table2",
    "context_findings",
)

RELIANCE = """SELECT c.*, i.low, i.high FROM context_reliance c
    LEFT JOIN intervals i ON i.metric = 'context_reliance' AND i.model = c.model
      AND i.perturbation = c.perturbation"""
EFFECTIVE = """SELECT e.*, i.low, i.high FROM effective_accuracy e
    LEFT JOIN intervals i ON i.metric = 'effective_accuracy' AND i.model = e.model
      AND i.perturbation = e.perturbation"""


def _paper(
    con: duckdb.DuckDBPyConnection,
    tables: set[str],
    reliance: pl.DataFrame,
    effective: pl.DataFrame,
) -> dict[str, pl.DataFrame]:
    """The paper's Table 1 and Table 2 layouts and the findings (docs/context.md), from
    the reliance and effective accuracy with their bounds already read."""

    def read(name: str) -> pl.DataFrame | None:
        return con.sql(f"SELECT * FROM {name} ORDER BY ALL").pl() if name in tables else None

    inputs, reliance_k, findings = (
        read(n) for n in ("model_inputs", "context_reliance_k", "context_findings")
    )
    if inputs is None or "context_reliance" not in tables:
        return {
            "context_table1": pl.DataFrame(),
            "context_table2": pl.DataFrame(),
            "context_findings": pl.DataFrame(schema=FINDING_SCHEMA),
        }
    return {
        "context_table1": paper_table1(inputs, reliance, effective),
        "context_table2": paper_table2(inputs, reliance_k)
        if reliance_k is not None
        else pl.DataFrame(),
        "context_findings": findings
        if findings is not None
        else pl.DataFrame(schema=FINDING_SCHEMA),
    }


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """SwapMix tables: reliance, effective accuracy and the flipped examples (with their
    thumbnails as ``examples_png``; ``context_examples`` without them for the CSV)."""
    del run
    tables = table_names(con)
    examples = (
        con.sql("SELECT * FROM context_examples ORDER BY rank").pl()
        if "context_examples" in tables
        else pl.DataFrame()
    )
    reliance = con.sql(f"{RELIANCE} ORDER BY ALL").pl()
    effective = con.sql(f"{EFFECTIVE} ORDER BY ALL").pl()
    return {
        "context_reliance": reliance,
        "effective_accuracy": effective,
        "context_examples": examples.drop("clean_png", "swapped_png", strict=False),
        "examples_png": examples,
        **_paper(con, tables, reliance, effective),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """The frames of :data:`TABLES`."""
    return {name: data[name] for name in TABLES}


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """Reliance and effective accuracy per model; the swaps that flipped an answer."""
    del run
    reliance, examples = data["context_reliance"], data["examples_png"]
    return {
        "context_reliance": fig.context_reliance(reliance, data["effective_accuracy"])
        if reliance.height
        else fig.placeholder("No context swaps in this run."),
        "context_flips": fig.context_flips(examples)
        if examples.height
        else fig.placeholder("No swap changed a correct answer."),
    }


def context_sentences(comparisons: pl.DataFrame | None, level: float) -> list[str]:
    """For every pair of models in ``comparisons`` (table ``model_comparisons``, context
    modality, metric context_reliance, all swaps): which relies less on irrelevant
    context where the difference is ``distinguishable`` (the adjusted p-value of the
    family of these comparisons below ``1 - level``), else that the two are
    indistinguishable at ``level``; each with its interval and the family it was adjusted
    over."""
    if comparisons is None or comparisons.is_empty():
        return []
    out = []
    for c in comparisons.iter_rows(named=True):
        a, b = c["model_a"], c["model_b"]
        note = family_note(c, "context reliance")
        if c["distinguishable"]:
            less, more = (a, b) if c["difference"] < 0 else (b, a)
            d, lo, hi = (
                (c["difference"], c["low"], c["high"])
                if less == a
                else (-c["difference"], -c["high"], -c["low"])
            )
            out.append(
                f"{less} relies less on context than {more} (difference in reliance "
                f"{with_interval(d, lo, hi)}; {note})."
            )
        else:
            d = with_interval(c["difference"], c["low"], c["high"])
            out.append(
                f"{a} and {b} rely on context indistinguishably at {level:.0%} "
                f"(difference {d}; {note})."
            )
    return out


def context(data: Data, run: Run) -> dict[str, Any] | None:
    """Reliance per swap kind, effective accuracy, the paper's layouts and findings in
    words; None without context swaps."""
    del run
    reliance = data["context_reliance"]
    if not reliance.height:
        return None
    effective = (
        data["effective_accuracy"]
        .filter(pl.col("perturbation") == "all")
        .select("model", "n_questions", "n_swapped", "accuracy", "effective_accuracy")
    )
    findings = data["context_findings"]
    return {
        "reliance": reliance.pivot(on="perturbation", index="model", values="reliance"),
        "effective": effective,
        "examples": data["context_examples"],
        "table1": data["context_table1"],
        "table2": data["context_table2"],
        "findings": [finding_sentence(r) for r in findings.iter_rows(named=True)],
    }


def context_side(con: duckdb.DuckDBPyConnection) -> pl.DataFrame | None:
    """Per model: clean accuracy, context reliance per swap kind and effective accuracy
    (all swaps), each with its bounds; None when the run has no context swaps."""
    if not con.execute("SELECT count(*) FROM context_reliance").fetchall()[0][0]:
        return None
    long = con.sql(
        f"""SELECT e.model, 'clean accuracy' AS col, 0 AS k, e.accuracy AS v,
                   a.low, a.high
            FROM effective_accuracy e
            {bounds("a", "accuracy", "a.model = e.model AND a.modality = 'clean'")}
            WHERE e.perturbation = 'all'
            UNION ALL
            SELECT c.model, 'reliance ' || replace(c.perturbation, 'swap_', ''),
                   CASE WHEN c.perturbation = 'all' THEN 1 ELSE 2 END, c.reliance, i.low, i.high
            FROM context_reliance c
            {
            bounds("i", "context_reliance", "i.model = c.model AND i.perturbation = c.perturbation")
        }
            UNION ALL
            SELECT e.model, 'effective accuracy', 3, e.effective_accuracy, i.low, i.high
            FROM effective_accuracy e
            {
            bounds(
                "i", "effective_accuracy", "i.model = e.model AND i.perturbation = e.perturbation"
            )
        }
            WHERE e.perturbation = 'all'"""
    ).pl()
    return wide(long)


def context_paper(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame | None, ...]:
    """The Table 2 layout and the findings of the SwapMix paper (docs/context.md)."""
    from vqarobust.metrics.context_paper import paper_table2

    tables = table_names(con)
    if "context_reliance_k" not in tables or "model_inputs" not in tables:
        return None, None
    table2 = paper_table2(
        con.sql("SELECT * FROM model_inputs").pl(), con.sql("SELECT * FROM context_reliance_k").pl()
    )
    findings = (
        con.sql("SELECT * FROM context_findings ORDER BY ALL").pl()
        if "context_findings" in tables
        else None
    )
    return (table2 if table2.height else None), findings


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """Context reliance per model and swap kind, its model comparisons, and the SwapMix
    paper's Table 2 layout and findings."""
    context_pairs = con.sql(
        "SELECT * FROM model_comparisons WHERE modality = 'context' "
        "AND metric = 'context_reliance' ORDER BY model_a, model_b"
    ).pl()
    table2, findings = context_paper(con)
    return {
        "context": context_side(con),
        "context_comparisons": context_pairs,
        "context_k": table2,
        "context_findings": findings,
    }


SECTION = Section(
    "context",
    ("context", "context_at_k", "context_findings", "uncertainty"),
    context,
    read,
    figures,
    tables,
    summary,
)

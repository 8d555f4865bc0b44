"""Context reliance when only a question's first c context objects are swapped.

    .venv/bin/python -u benchmarks/context_cap.py results/scenes-features/robustness.duckdb

``context.max_objects`` caps the context objects swapped per question (null: every one,
the paper's rule). A cap keeps the swaps of the first c objects exactly as they are
without it (feature swaps are drawn per question, object and rank; pixel swaps draw
object after object from one generator per question, so the first objects' draws come
first either way), so a run with every object swapped holds the answers of every smaller
cap: this script drops the swaps of each question's objects past the c-th (in the order
they are swapped, which is object id or feature row order on the scenes and GQA; not on
VQAv2's pixel swaps, largest instance first, which this script does not handle) and
recomputes reliance (:func:`vqarobust.metrics.context.context_tables`) from the run's
database.
Prints one Markdown table: model, reliance (any swap) at each cap and with every object,
and the share of the run's questions that have more context objects than the cap.
"""

from __future__ import annotations

import argparse

import duckdb
import polars as pl

from vqarobust.metrics.context import context_tables

# Which swap table, and which of its columns names the swapped object, per input kind.
SWAP_TABLES = {"context_swaps": "object_id", "feature_swaps": "object_index"}


def swap_objects(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Per (inputs, question, perturbation, severity): the position (1, 2, ...) of the
    swapped object among the question's context objects, in the order they are swapped."""
    tables = {r[0] for r in con.sql("SHOW TABLES").fetchall()}
    frames = []
    for table, column in SWAP_TABLES.items():
        if table not in tables:
            continue
        source = "source" if table == "feature_swaps" else "'pixels'"
        frames.append(
            con.sql(f"""
            SELECT {source} AS inputs, question_id, perturbation,
                   CAST(severity AS SMALLINT) AS severity,
                   DENSE_RANK() OVER (PARTITION BY {source}, question_id
                                      ORDER BY {column}) AS position
            FROM {table}""").pl()
        )  # noqa: S608 - names from SWAP_TABLES
    if not frames:
        raise SystemExit("the database has no swap table: run a study with context perturbations")
    return pl.concat(frames)


def reliance_by_cap(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Reliance (``all``: any swap) per model and cap, and per cap the share of questions
    with more context objects."""
    positions = swap_objects(con)
    inputs = con.sql("SELECT model, inputs FROM model_inputs").pl()
    scored = con.sql("""SELECT model, modality, perturbation, CAST(severity AS SMALLINT)
                        AS severity, question_id, answer, score FROM predictions
                        WHERE modality IN ('clean', 'context')""").pl()
    context = (
        scored.filter(pl.col("modality") == "context")
        .join(inputs, on="model")
        .join(positions, on=["inputs", "question_id", "perturbation", "severity"], how="left")
    )
    if context["position"].null_count():
        raise SystemExit("context predictions without a swap row: is the database complete?")
    clean = scored.filter(pl.col("modality") == "clean")
    top = int(context["position"].max())
    rows = []
    for cap in [*range(1, top), None]:
        kept = context if cap is None else context.filter(pl.col("position") <= cap)
        table = context_tables(pl.concat([clean, kept.select(clean.columns)]))
        reliance = table["context_reliance"].filter(pl.col("perturbation") == "all")
        rows.append(reliance.select("model", "reliance").with_columns(cap=pl.lit(cap)))
    objects = positions.group_by("inputs", "question_id").agg(pl.col("position").max())
    n_questions = clean.select("question_id").n_unique()
    shares = pl.DataFrame(
        {
            "cap": list(range(1, top)),
            "share": [
                objects.filter(pl.col("position") > c).select("question_id").n_unique()
                / n_questions
                for c in range(1, top)
            ],
        }
    )
    return pl.concat(rows), shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("database", help="a run's robustness.duckdb")
    args = parser.parse_args()
    con = duckdb.connect(args.database, read_only=True)
    reliance, shares = reliance_by_cap(con)
    caps = sorted(c for c in reliance["cap"].unique().to_list() if c is not None)
    print("| model | " + " | ".join(f"first {c}" for c in caps) + " | every object |")
    print("|---|" + "---|" * (len(caps) + 1))
    for model in sorted(reliance["model"].unique().to_list()):
        mine = reliance.filter(pl.col("model") == model)
        cells = [
            mine.filter(pl.col("cap").is_null() if c is None else pl.col("cap") == c)[
                "reliance"
            ].item()
            for c in [*caps, None]
        ]
        print(f"| {model} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")
    print(
        "| questions with more context objects | "
        + " | ".join(f"{s:.1%}" for s in shares["share"].to_list())
        + " | - |"
    )


if __name__ == "__main__":
    main()

"""Clean accuracy and context reliance per scenes question kind, from a scenes run.

    .venv/bin/python benchmarks/scenes_kinds.py [results/scenes/robustness.duckdb] \
        [--scene-seed 0 --split test]

The kinds (colour, size, shape, count, exist, relation) come from the scenes generator
itself, so a question's kind is the template that made it. One Markdown table: per model
and kind, clean accuracy and reliance (share of correctly answered questions whose answer
any swap changes, docs/context.md).
"""

from __future__ import annotations

import argparse

import duckdb
import polars as pl

from vqarobust.datasets import scenes
from vqarobust.metrics.context import context_by_group
from vqarobust.summary import markdown_table

KINDS = ("colour", "size", "shape", "count", "exist", "relation")


def kind_table(scored: pl.DataFrame, kinds: dict[int, str]) -> pl.DataFrame:
    """One row per model, one ``accuracy / reliance`` column per kind (with its count)."""
    groups = pl.DataFrame({"question_id": list(kinds), "group": list(kinds.values())})
    long = context_by_group(scored, groups)
    counts = dict(long.group_by("group").agg(pl.col("n_questions").first()).iter_rows())
    cells: dict[str, dict[str, str]] = {}
    for model, kind, _, accuracy, reliance in long.iter_rows():
        shown = "-" if reliance is None else f"{reliance:.3f}"
        cells.setdefault(model, {})[kind] = f"{accuracy:.3f} / {shown}"
    order = [k for k in KINDS if k in counts]
    return pl.DataFrame(
        [
            {"model": m, **{f"{k} ({counts[k]})": cells[m].get(k, "") for k in order}}
            for m in sorted(cells)
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", nargs="?", default="results/scenes/robustness.duckdb")
    parser.add_argument("--scene-seed", type=int, default=0)
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    with duckdb.connect(args.db, read_only=True) as con:
        scored = con.sql(
            "SELECT model, modality, perturbation, question_id, answer, score FROM predictions "
            "WHERE modality IN ('clean', 'context')"
        ).pl()
        image_ids = [r[0] for r in con.sql("SELECT DISTINCT image_id FROM questions").fetchall()]
    index = scenes.question_index(args.scene_seed, args.split, sorted(image_ids))
    kinds = {qid: q.kind for qid, (_, q) in index.items()}
    print("Clean accuracy / context reliance per question kind (questions per kind):\n")
    print("\n".join(markdown_table(kind_table(scored, kinds))))


if __name__ == "__main__":
    main()

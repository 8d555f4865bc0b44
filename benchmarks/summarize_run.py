"""Summarize the per-job benchmark files Snakemake wrote under benchmarks/out/.

    .venv/bin/python benchmarks/summarize_run.py [benchmarks/out]

Prints, per rule: job count, summed job seconds, the slowest job and peak memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl


def summarize(root: str = "benchmarks/out") -> pl.DataFrame:
    """One row per rule from Snakemake's benchmark TSVs (rule = first folder below the dataset)."""
    rows = []
    for tsv in sorted(Path(root).rglob("*.tsv")):
        rel = tsv.relative_to(root).parts
        rule = rel[1] if len(rel) > 2 else Path(rel[-1]).stem
        df = pl.read_csv(tsv, separator="\t", null_values=["-", "NA"])
        rows.append({"rule": rule, "s": float(df["s"][0]), "max_rss_mb": df["max_rss"][0]})
    if not rows:
        raise SystemExit(f"no benchmark files under {root}")
    return (
        pl.DataFrame(rows)
        .group_by("rule")
        .agg(
            pl.len().alias("jobs"),
            pl.col("s").sum().round(1).alias("job_seconds"),
            pl.col("s").max().round(1).alias("slowest_job_s"),
            pl.col("max_rss_mb").max().alias("peak_rss_mb"),
        )
        .sort("job_seconds", descending=True)
    )


if __name__ == "__main__":
    with pl.Config(tbl_rows=50, tbl_hide_dataframe_shape=True):
        print(summarize(*sys.argv[1:]))

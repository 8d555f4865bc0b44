"""Summarize the per-job benchmark files Snakemake wrote under benchmarks/out/.

    .venv/bin/python benchmarks/summarize_run.py [--dataset easy-vqa] [ROOT]

Prints, per rule: job count, summed job seconds, the slowest job and peak memory; then
the summed seconds per model of the inference rules (docs/performance.md's per-model numbers).
An inference job is per model (``run_model/<model>.tsv``) or, with ``inference_jobs:
subset``, per model and subset (``run_model/<model>/<subset>.tsv``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

PER_MODEL_RULES = ("run_model", "image_attention")


def job_rows(root: str | Path = "benchmarks/out", dataset: str | None = None) -> pl.DataFrame:
    """One row per benchmark TSV: dataset, rule, model (the folder below an inference
    rule, else null), job name, seconds, peak memory in MB."""
    base = Path(root) / dataset if dataset else Path(root)
    rows = []
    for tsv in sorted(base.rglob("*.tsv")):
        rel = tsv.relative_to(root).parts
        rule = rel[1] if len(rel) > 2 else Path(rel[-1]).stem
        model = None
        if rule in PER_MODEL_RULES:
            model = rel[2] if len(rel) > 3 else Path(rel[-1]).stem
        df = pl.read_csv(tsv, separator="\t", null_values=["-", "NA"])
        rows.append(
            {
                "dataset": rel[0],
                "rule": rule,
                "model": model,
                "job": tsv.stem,
                "s": float(df["s"][0]),
                "max_rss_mb": df["max_rss"][0],
            }
        )
    if not rows:
        raise SystemExit(f"no benchmark files under {base}")
    return pl.DataFrame(rows)


def summarize(root: str | Path = "benchmarks/out", dataset: str | None = None) -> pl.DataFrame:
    """One row per rule (rule = the first folder below the dataset)."""
    return (
        job_rows(root, dataset)
        .group_by("rule")
        .agg(
            pl.len().alias("jobs"),
            pl.col("s").sum().round(1).alias("job_seconds"),
            pl.col("s").max().round(1).alias("slowest_job_s"),
            pl.col("max_rss_mb").max().alias("peak_rss_mb"),
        )
        .sort("job_seconds", descending=True)
    )


def per_model(root: str | Path = "benchmarks/out", dataset: str | None = None) -> pl.DataFrame:
    """Summed seconds and the slowest job per model of the inference rules."""
    jobs = job_rows(root, dataset).filter(pl.col("rule").is_in(PER_MODEL_RULES))
    return (
        jobs.sort("s", descending=True)
        .group_by("rule", "model", maintain_order=True)
        .agg(
            pl.len().alias("jobs"),
            pl.col("s").sum().round(1).alias("job_seconds"),
            pl.col("job").first().alias("slowest_job"),
            pl.col("s").max().round(1).alias("slowest_job_s"),
        )
        .sort("rule", "model")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "root",
        nargs="?",
        default="benchmarks/out",
        help="the folder of Snakemake's benchmark files",
    )
    parser.add_argument("--dataset", help="only this dataset's jobs (e.g. easy-vqa)")
    args = parser.parse_args()
    with pl.Config(tbl_rows=50, tbl_hide_dataframe_shape=True, fmt_str_lengths=80):
        print(summarize(args.root, args.dataset))
        print(per_model(args.root, args.dataset))


if __name__ == "__main__":
    main()

"""Summarize the per-job benchmark files Snakemake wrote under benchmarks/out/.

    .venv/bin/python benchmarks/summarize_run.py [--dataset easy-vqa] [ROOT]

Prints, per rule: job count, summed job seconds, the slowest job and peak memory; then
the summed seconds per model of the inference rules (the README's per-model numbers).
A job that ran in a child of the warm process (docs/workflow.md, "Warm start") has its
peak memory from the child's last log line: the benchmark file measured only the job's
own process, which waited for the child.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import polars as pl

PER_MODEL_RULES = ("run_model", "image_attention")
WARM_PEAK = re.compile(r"warm child: [0-9.]+ s CPU, peak (\d+) KiB")


def warm_peak_mb(log: Path) -> float | None:
    """The peak memory (MB) a warm child logged, None for a job that ran in its own process."""
    if not log.exists():
        return None
    found = WARM_PEAK.findall(log.read_text(errors="replace"))
    return round(int(found[-1]) / 1024, 2) if found else None


def job_rows(root: str | Path = "benchmarks/out", dataset: str | None = None) -> pl.DataFrame:
    """One row per benchmark TSV: dataset, rule, model (the folder below an inference
    rule, else null), job name, seconds, peak memory in MB."""
    base = Path(root) / dataset if dataset else Path(root)
    rows = []
    for tsv in sorted(base.rglob("*.tsv")):
        rel = tsv.relative_to(root).parts
        rule = rel[1] if len(rel) > 2 else Path(rel[-1]).stem
        model = rel[2] if rule == "run_model" and len(rel) > 3 else None
        if rule == "image_attention":
            model = Path(rel[-1]).stem
        df = pl.read_csv(tsv, separator="\t", null_values=["-", "NA"])
        # benchmarks/out/<rel>.tsv beside logs/<rel>.log in the run's folder
        log = Path(root).resolve().parents[1] / "logs" / Path(*rel).with_suffix(".log")
        peak = warm_peak_mb(log)
        rows.append({"dataset": rel[0], "rule": rule, "model": model, "job": tsv.stem,
                     "s": float(df["s"][0]),
                     "max_rss_mb": df["max_rss"][0] if peak is None else peak})  # fmt: skip
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
        )  # fmt: skip
        .sort("rule", "model")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="benchmarks/out",
                        help="the folder of Snakemake's benchmark files")  # fmt: skip
    parser.add_argument("--dataset", help="only this dataset's jobs (e.g. easy-vqa)")
    args = parser.parse_args()
    with pl.Config(tbl_rows=50, tbl_hide_dataframe_shape=True, fmt_str_lengths=80):
        print(summarize(args.root, args.dataset))
        print(per_model(args.root, args.dataset))


if __name__ == "__main__":
    main()

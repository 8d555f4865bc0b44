"""What storing the corrupted images as JPEG q95 (config/paper.yaml) instead of PNG does to
accuracy and to the pixels, on the easy-VQA default subset.

    .venv/bin/python benchmarks/storage_accuracy.py WORKDIR

Runs the workflow twice, in WORKDIR/png and WORKDIR/jpeg: config/config.yaml's 200
test images and two reference checkpoints with the paper protocol's 14 corruptions at
severities 1-5 (no grayscale, controls, text or basic questions), ``storage.image_format``
png and jpeg at quality 95 (one core each, one after the other). Prints per model the
mean accuracy over the 70 corrupted subsets under each storage, the per-subset
differences, MMI and VRE, and the mean absolute pixel difference (0-255) between each
corrupted image as the two runs stored it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import yaml

from vqarobust import store

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("png", "jpeg")
NAME = "easy-vqa-store"


def run(workdir: Path, fmt: str) -> Path:
    """One run's DuckDB file (the run is skipped where it is complete)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.update(
        corruptions=[c for c in config["corruptions"] if c != "grayscale"],
        controls=[],
        text={"perturbations": []},
        basic_questions={"rankers": []},
        storage={"image_format": fmt, "jpeg_quality": 95},
    )
    config["dataset"]["name"] = NAME
    folder = workdir / fmt
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "checkpoints").exists():
        (folder / "checkpoints").symlink_to(REPO / "checkpoints")
    (folder / "study.yaml").write_text(yaml.safe_dump(config))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(folder),
            "--configfile",
            str(folder / "study.yaml"),
            "--replace-workflow-config",
            "--cores",
            "1",
        ],
        check=True,
    )
    return folder / "results" / NAME / "robustness.duckdb"


def main(workdir: Path) -> None:
    acc, roots = {}, {}
    for fmt in FORMATS:
        db = run(workdir, fmt)
        roots[fmt] = db.parent
        with duckdb.connect(str(db), read_only=True) as con:
            acc[fmt] = con.sql("SELECT model, perturbation, severity, accuracy FROM accuracy").pl()
            mmi = con.sql(
                "SELECT model, mmi FROM mmi WHERE modality = 'image' AND "
                "scope = 'all' AND \"group\" = 'all' ORDER BY model"
            ).fetchall()
            vre = con.sql(
                "SELECT model, vre FROM vre_model WHERE modality = 'image' ORDER BY model"
            ).fetchall()
        print(fmt, "MMI", mmi, "VRE", vre)
    both = acc["png"].join(acc["jpeg"], on=["model", "perturbation", "severity"], suffix="_jpeg")
    both = both.with_columns(diff=pl.col("accuracy_jpeg") - pl.col("accuracy"))
    corrupted = both.filter(pl.col("perturbation") != "clean")
    print(both.filter(pl.col("perturbation") == "clean"))
    print(
        corrupted.group_by("model")
        .agg(
            png=pl.col("accuracy").mean(),
            jpeg=pl.col("accuracy_jpeg").mean(),
            mean_diff=pl.col("diff").mean(),
            max_abs_diff=pl.col("diff").abs().max(),
            subsets_changed=(pl.col("diff") != 0).sum(),
            subsets=pl.len(),
        )
        .sort("model")
    )
    print(
        corrupted.group_by("model", "perturbation")
        .agg(mean_diff=pl.col("diff").mean(), min=pl.col("diff").min(), max=pl.col("diff").max())
        .sort("model", "perturbation")
    )
    rows = []
    for p, s in sorted(set(zip(corrupted["perturbation"], corrupted["severity"], strict=True))):
        a, b = (
            {
                r["image_id"]: store.decode_image(r["bytes"])
                for r in store.iter_images(roots[f] / "images" / p / str(s))
            }
            for f in FORMATS
        )
        rows.append(
            (p, s, float(np.mean([np.abs(a[i].astype(np.int16) - b[i]).mean() for i in a])))
        )
    mae = pl.DataFrame(rows, schema=["perturbation", "severity", "mae"], orient="row")
    print("mean |JPEG q95 - PNG| per pixel (0-255), over every image:", mae["mae"].mean())
    print(
        mae.group_by("perturbation")
        .agg(pl.col("mae").mean(), min=pl.col("mae").min(), max=pl.col("mae").max())
        .sort("mae")
    )


if __name__ == "__main__":
    with pl.Config(tbl_rows=40):
        main(Path(sys.argv[1]))

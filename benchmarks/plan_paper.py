"""Time Snakemake's plan of config/paper.yaml at 3,000 images (a dry run).

    .venv/bin/python benchmarks/plan_paper.py

Writes the JSON files of a 3,000-image VQAv2 miniature (no images needed to plan),
points config/paper.yaml at them and runs ``snakemake -n``; prints the wall time and
the job count per rule.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from vqarobust.datasets.miniature import write_mini_vqav2

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mini = write_mini_vqav2(root / "vqav2", n_images=3000, images="none")
        (root / "override.yaml").write_text(
            yaml.safe_dump({"dataset": {k: str(v) for k, v in mini.items()}})
        )
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            tmp,
            "--configfile",
            str(REPO / "config" / "paper.yaml"),
            str(root / "override.yaml"),
            "--replace-workflow-config",
            "-n",
            "--cores",
            "8",
            "--resources",
            "gpu=4",
        ]
        t = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - t
    counts = re.findall(r"^(\w+)\s+(\d+)$", out.stdout + out.stderr, flags=re.MULTILINE)
    print(f"snakemake -n on config/paper.yaml (3,000 images): {seconds:.1f} s")
    print("| rule | jobs |\n|---|---|")
    # A dry run prints its job table twice; the first ends at "total".
    for rule, n in counts:
        print(f"| {rule} | {n} |")
        if rule == "total":
            break


if __name__ == "__main__":
    main()

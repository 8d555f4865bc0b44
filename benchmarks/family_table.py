"""The per-family table of docs/corruptions.md ("Beyond ImageNet-C"): relative drop and
VRE per model and perturbation family, with their bootstrap intervals, from a run's
database (tables vre_family and intervals), as Markdown.

    .venv/bin/python benchmarks/family_table.py results/easy-vqa-geometric/robustness.duckdb
"""

from __future__ import annotations

import sys

import duckdb

QUERY = """
SELECT f.model, f.family, f.n_perturbations, f.relative_drop, r.low, r.high, f.vre, v.low,
       v.high
FROM vre_family f
JOIN intervals r ON r.metric = 'relative_drop_family' AND r.model = f.model
     AND r.modality = f.modality AND r.perturbation = f.family
JOIN intervals v ON v.metric = 'vre_family' AND v.model = f.model
     AND v.modality = f.modality AND v.perturbation = f.family
WHERE f.modality = 'image' ORDER BY f.model, f.relative_drop DESC, f.family
"""


def main(path: str) -> None:
    with duckdb.connect(path, read_only=True) as con:
        rows = con.sql(QUERY).fetchall()
    print("| model | family | perturbations | relative drop [95% interval] | VRE [95% interval] |")
    print("|---|---|---|---|---|")
    for model, family, n, d, d_lo, d_hi, v, v_lo, v_hi in rows:
        print(
            f"| {model} | {family} | {n} | {d:.3f} [{d_lo:.3f}, {d_hi:.3f}] "
            f"| {v:.3f} [{v_lo:.3f}, {v_hi:.3f}] |"
        )


if __name__ == "__main__":
    main(sys.argv[1])

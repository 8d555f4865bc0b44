"""How many images are enough: the planner (``vqarobust plan-size``) on a simulated pilot
of the paper's shape, and a simulation of its numbers.

    .venv/bin/python benchmarks/plan_size.py paper [--images 300] [--half-width 0.01]
        [--detect 0.02]
    .venv/bin/python benchmarks/plan_size.py check [--sets 400]

``paper`` builds the results database of a pilot with the paper protocol's shape
(benchmarks/uncertainty.py's synthetic run: 6 models, 148 subsets each, 3 to 8 questions
per image) on ``--images`` images, with the run's 1,000 image resamples, and prints the
plan as ``vqarobust plan-size`` does. ``check`` plans from one simulated pilot of 200
images (5 questions each, accuracy 0.7, relative drop 0.2, questions correlated within an
image) and draws ``--sets`` fresh datasets of each planned size: the mean half-width of
the 95% intervals reached, against the target 0.02, and the share of datasets in which a
true clean-accuracy difference of 0.03 is found, against the planned 80%
(docs/metrics.md, "How many images are enough").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.uncertainty import synthetic_families, write_run  # noqa: E402
from vqarobust.metrics.sample_size import Target, plan_size, to_markdown  # noqa: E402


def paper(n_images: int, half_width: float, detect: float) -> None:
    from vqarobust.db import DatabaseInputs, build_database

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        paths = write_run(out, n_images)
        db = out / "robustness.duckdb"
        build_database(
            db,
            DatabaseInputs(out / "questions.parquet", paths),
            families=synthetic_families(),
            uncertainty={"resamples": 1000},
        )
        plan = plan_size(str(db), Target(half_width=half_width, detect=detect))
        command = (
            f"benchmarks/plan_size.py paper --images {n_images} --half-width "
            f"{half_width:g} --detect {detect:g}"
        )
        print(to_markdown(plan, command), end="")


def check(n_sets: int) -> None:
    from vqarobust.metrics.simulation import SimulatedStudy, check_plan

    target = Target(half_width=0.02, detect=0.03)
    c = check_plan(target, SimulatedStudy(concentration=4.0), n_sets=n_sets, resamples=1000)
    print(f"planned from a 200-image pilot, {n_sets} datasets of each planned size:")
    print(
        f"clean accuracy: {c.accuracy_images:,} images, mean 95% half-width "
        f"{c.accuracy_half_width:.4f} (target 0.02)"
    )
    print(
        f"relative drop: {c.drop_images:,} images, mean 95% half-width "
        f"{c.drop_half_width:.4f} (target 0.02)"
    )
    print(
        f"difference of 0.03 in clean accuracy: {c.detect_images:,} images, found in "
        f"{c.power:.1%} of datasets (planned 80%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("paper")
    p.add_argument("--images", type=int, default=300)
    p.add_argument("--half-width", type=float, default=0.01)
    p.add_argument("--detect", type=float, default=0.02)
    p = sub.add_parser("check")
    p.add_argument("--sets", type=int, default=400)
    args = parser.parse_args()
    if args.command == "paper":
        paper(args.images, args.half_width, args.detect)
    else:
        check(args.sets)


if __name__ == "__main__":
    main()

"""Time and memory of the bootstrap, and of the whole load_duckdb, at paper scale.

    .venv/bin/python benchmarks/uncertainty.py bootstrap [--resamples 1000]
    .venv/bin/python benchmarks/uncertainty.py load_duckdb [--resamples 1000] [--out DIR]
    .venv/bin/python benchmarks/uncertainty.py coverage [--sets 500]

Synthetic scored predictions at the paper protocol's size (docs/paper.md): 3,000 images,
16,473 questions (3 to 8 per image), 6 models, and 148 subsets per model: clean, the 14
benchmark corruptions x 5 severities, the blank control, 11 text perturbations x 5 and
3 basic-question rankers x 7 levels (14.6 million predictions). ``bootstrap`` times
:func:`vqarobust.metrics.intervals.uncertainty_tables` on them (goal: under 60 s and 4 GB
on the 2-core machine); ``load_duckdb`` writes them as prediction files and times
:func:`vqarobust.db.build_database`, scoring included (goal: under 5 min and 8 GB). Peak
memory is the process's maximum resident set size, the synthetic data included.
``coverage`` simulates datasets from a known model (300 images x 5 questions, accuracy
0.7, relative drop 0.2, questions correlated within an image) and prints how often the
95% intervals cover the truth, resampling images and resampling questions, and how much
wider image-cluster intervals are than per-question ones (docs/metrics.md).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vqarobust import text  # noqa: E402
from vqarobust.corruptions import family, names  # noqa: E402
from vqarobust.metrics.simulation import (  # noqa: E402
    SimulatedModel,
    simulate_questions,
    simulate_scored,
    write_questions,
)

N_IMAGES = 3000
QUESTIONS_PER_IMAGE = [3, 4, 5, 6, 7, 8]
MODELS = ["vilt", "blip-base", "blip-large", "vle", "pnp-vqa", "llava-7b"]
RANKERS = ["bq_lasso", "bq_cosine", "bq_bleu"]
TEXT = [
    "keyboard",
    "ocr",
    "char_insert",
    "char_replace",
    "char_swap",
    "char_delete",
    "synonym_replace",
    "word_insert",
    "word_swap",
    "word_delete",
    "punct_insert",
]


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def synthetic_run(n_images: int = N_IMAGES) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, str]]:
    """Questions, scored predictions and perturbation families of the paper-scale run
    (of the paper's shape on ``n_images`` images)."""
    questions = simulate_questions(n_images, QUESTIONS_PER_IMAGE, seed=0)
    corruptions = names(benchmark=True)
    drops: dict[tuple[str, str, int], float] = {}
    for i, c in enumerate(corruptions):
        drops |= {("image", c, s): 0.02 * s * (1 + i % 4) for s in range(1, 6)}
    drops[("image", "blank", 1)] = 0.5
    for i, p in enumerate(TEXT):
        drops |= {("text", p, s): 0.015 * s * (1 + i % 3) for s in range(1, 6)}
    for r in RANKERS:
        drops |= {("basic_question", r, lvl): 0.05 + 0.01 * lvl for lvl in range(1, 8)}
    models = {
        m: SimulatedModel(
            0.62 + 0.03 * k, {key: min(0.95, d * (1 + 0.15 * k)) for key, d in drops.items()}
        )
        for k, m in enumerate(MODELS)
    }
    scored = simulate_scored(questions, models, seed=0)
    return questions, scored, synthetic_families()


def synthetic_families() -> dict[str, str]:
    """Perturbation -> class of the synthetic run (as the workflow passes them)."""
    families = {c: family(c) for c in names(benchmark=True)} | {"blank": "control"}
    return families | {p: text.level(p) for p in TEXT} | {r: r.removeprefix("bq_") for r in RANKERS}


def bench_bootstrap(resamples: int) -> None:
    from vqarobust.metrics.intervals import uncertainty_tables
    from vqarobust.metrics.uncertainty import Settings

    questions, scored, families = synthetic_run()
    print(
        f"{scored.height:,} predictions, {questions.height:,} questions, "
        f"{N_IMAGES:,} images; peak so far {_peak_gb():.2f} GB"
    )
    start = time.perf_counter()
    tables = uncertainty_tables(
        scored, questions, Settings(resamples=resamples), families=families, controls=["blank"]
    )
    seconds = time.perf_counter() - start
    sizes = ", ".join(f"{k} {v.height:,}" for k, v in tables.items())
    print(
        f"uncertainty_tables, {resamples} resamples: {seconds:.1f} s, peak RSS "
        f"{_peak_gb():.2f} GB ({sizes} rows)"
    )


def bench_load_duckdb(resamples: int, out: Path) -> None:
    """Write the synthetic run's files into ``out`` (unless they are there: then only
    build_database runs in this process, so its peak memory is its own)."""
    from vqarobust.db import DatabaseInputs, build_database

    families = synthetic_families()
    paths = sorted((out / "predictions").glob("*/*.parquet"))
    if not paths:
        paths = write_run(out)
    print(f"{len(paths)} prediction files; peak so far {_peak_gb():.2f} GB")
    start = time.perf_counter()
    counts = build_database(
        out / "robustness.duckdb",
        DatabaseInputs(out / "questions.parquet", paths),
        families=families,
        uncertainty={"resamples": resamples},
    )
    seconds = time.perf_counter() - start
    print(
        f"build_database ({counts['predictions']:,} predictions, {resamples} resamples): "
        f"{seconds:.1f} s, peak RSS {_peak_gb():.2f} GB"
    )


def write_run(out: Path, n_images: int = N_IMAGES) -> list[Path]:
    """The synthetic run as a questions file and one prediction file per model and
    perturbation, as the workflow writes them."""
    questions, scored, _ = synthetic_run(n_images)
    out.mkdir(parents=True, exist_ok=True)
    write_questions(questions, out / "questions.parquet")
    paths = []
    preds = scored.drop("score").with_columns(pl.col("severity").cast(pl.Int16))
    for (model, perturbation), part in preds.group_by("model", "perturbation"):
        path = out / "predictions" / model / f"{perturbation}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_parquet(path)
        paths.append(path)
    return paths


def bench_coverage(n_sets: int) -> None:
    from vqarobust.metrics.simulation import SimulatedStudy, interval_coverage, interval_width

    for cluster in ("image", "question"):
        acc, drop = interval_coverage(n_sets, cluster, SimulatedStudy(concentration=4.0))
        print(
            f"correlated questions, {cluster} bootstrap: coverage of accuracy {acc:.3f}, "
            f"of relative drop {drop:.3f} ({n_sets} datasets)"
        )
    acc, drop = interval_coverage(n_sets, "image", SimulatedStudy(concentration=None))
    print(
        f"independent questions, image bootstrap: coverage of accuracy {acc:.3f}, "
        f"of relative drop {drop:.3f}"
    )
    for label, conc in (("correlated (concentration 2)", 2.0), ("independent", None)):
        ratio = interval_width("image", conc) / interval_width("question", conc)
        print(f"{label}: image-cluster / per-question interval width {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["bootstrap", "load_duckdb", "coverage"])
    parser.add_argument("--sets", type=int, default=500, help="coverage: simulated datasets")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument(
        "--out",
        type=Path,
        help="folder for load_duckdb's files (default: "
        "temp); a second call with the same folder only times build_database",
    )
    args = parser.parse_args()
    if args.what == "bootstrap":
        bench_bootstrap(args.resamples)
    elif args.what == "coverage":
        bench_coverage(args.sets)
    elif args.out:
        bench_load_duckdb(args.resamples, args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            bench_load_duckdb(args.resamples, Path(tmp))


if __name__ == "__main__":
    main()

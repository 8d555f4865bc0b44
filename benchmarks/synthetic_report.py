"""Render the report for a synthetic run at paper width, to check that figures stay legible.

    .venv/bin/python benchmarks/synthetic_report.py OUT_DIR

Six models with long names, the 14 benchmark corruptions at 5 severities, the blank
control, every text perturbation and three basic-question rankers at 7 levels, on 12
easy-VQA images. Images and question sets are real (corrupted and perturbed by the
package); the answers are synthetic: each model answers right with a probability that
falls with severity at a model- and perturbation-specific rate (seeded per question).
Writes OUT_DIR/report/index.html with every figure; look at them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vqarobust import store, text  # noqa: E402
from vqarobust.corruptions import family, names  # noqa: E402
from vqarobust.datasets import PreparedOutputs, prepare_dataset  # noqa: E402
from vqarobust.db import DatabaseInputs, build_database  # noqa: E402
from vqarobust.materialize.images import corrupt_subset  # noqa: E402
from vqarobust.materialize.questions import (  # noqa: E402
    basic_question_sets,
    perturb_question_set,
    rank_basic_questions,
)
from vqarobust.report import render_report  # noqa: E402
from vqarobust.seeding import derive_seed, item_rng  # noqa: E402
from vqarobust.text.ranking import RankSettings, ranker_name  # noqa: E402

MODELS = [
    "vilt-b32-finetuned-vqa",
    "blip-vqa-capfilt-large",
    "llava-1.5-7b-hf",
    "llava-1.5-13b-hf",
    "vle-large-vqa-finetuned",
    "pnp-vqa-unifiedqa-v2-large",
]
RANKERS = ["bq_lasso", "bq_cosine", "bq_bleu"]


def main(out: str) -> None:
    root = Path(out)
    ds = root / "dataset"
    prepare_dataset(
        "easy-vqa",
        PreparedOutputs(
            ds / "questions.parquet", ds / "images", ds / "manifest.txt", ds / "dataset.json"
        ),
        split="test",
        n_images=12,
        seed=0,
    )
    questions = pl.from_arrow(store.read_questions(ds / "questions.parquet"))
    corruptions = names(benchmark=True)
    subsets = [("clean", 0, "clean", ds / "images")]
    for c in corruptions:
        for s in range(1, 6):
            corrupt_subset(ds / "images", root / "images" / c / str(s), c, s)
            subsets.append(("image", s, c, root / "images" / c / str(s)))
    corrupt_subset(ds / "images", root / "images" / "blank" / "1", "blank", 1)
    subsets.append(("image", 1, "blank", root / "images" / "blank" / "1"))
    sets = []
    for p in text.names(available=True):
        paths = {s: root / "questions" / p / f"{s}.parquet" for s in range(1, 6)}
        perturb_question_set(ds / "questions.parquet", paths, p)
        sets += [("text", s, p, path) for s, path in paths.items()]
    for r in RANKERS:
        ranks = root / "questions" / "rankings" / f"{r}.parquet"
        rank_basic_questions(
            ds / "questions.parquet", [ds / "questions.parquet"], ranks, [r], RankSettings(21)
        )
        paths = {lvl: root / "questions" / r / f"{lvl}.parquet" for lvl in range(1, 8)}
        basic_question_sets(ds / "questions.parquet", ranks, r, paths)
        sets += [("basic_question", lvl, r, path) for lvl, path in paths.items()]
    truth = dict(zip(questions["question_id"], questions["answers"].list.first(), strict=True))
    rows = []
    for mi, model in enumerate(MODELS):
        for modality, severity, perturbation, _ in [*subsets, *sets]:
            rate = 0.03 + 0.02 * mi + 0.01 * (derive_seed(0, perturbation) % 5)
            p_right = max(0.05, 0.9 - 0.05 * mi - rate * severity)
            for qid in questions["question_id"]:
                rng = item_rng(0, model, perturbation, severity, qid)
                answer = truth[qid] if rng.random() < p_right else "wrong"
                rows.append((qid, answer, model, modality, perturbation, severity, False))
    preds = pl.DataFrame(
        rows,
        orient="row",
        schema=[
            "question_id",
            "answer",
            "model",
            "modality",
            "perturbation",
            "severity",
            "truncated",
        ],
    )
    preds = preds.with_columns(pl.col("severity").cast(pl.Int16))
    pred_path = root / "predictions.parquet"
    store.write_table(preds.to_arrow(), pred_path)
    families = {c: family(c) for c in [*corruptions, "blank"]}
    families |= {p: text.level(p) for p in text.names(available=True)}
    families |= {r: ranker_name(r) for r in RANKERS}
    db = root / "robustness.duckdb"
    build_database(
        db,
        DatabaseInputs(
            ds / "questions.parquet",
            [pred_path],
            question_set_paths=[str(p) for *_, p in sets],
            image_subsets=[(p, s, str(d)) for _, s, p, d in subsets],
        ),
        families=families,
    )
    render_report(db, root / "report" / "index.html")
    print(
        f"{root / 'report' / 'index.html'}: {len(MODELS)} models, {len(subsets)} "
        f"image subsets, {len(sets)} question sets"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/synthetic-report")

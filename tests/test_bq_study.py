"""config/basic-questions.yaml end to end on a VQAv2-format miniature: train2014 and
val2014 question files as the pool (one with annotations, one by the question-form rule),
val as the main questions, the general and the yes/no dataset, through DuckDB and the
report; then what a change re-runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tests.conftest import REPO
from tests.study_run import run_study
from tests.tiny_checkpoints import tiny_blip
from vqarobust.datasets.miniature import write_mini_vqav2, write_question_pool
from vqarobust.metrics.rscore import r_score
from vqarobust.report.sections.questions import ranker_sentence
from vqarobust.text import pools
from vqarobust.text import ranking as bq

pytestmark = [pytest.mark.workflow, pytest.mark.slow]
STUDY = REPO / "config" / "basic-questions.yaml"


def snakemake(workdir: Path, override: dict, *args: str) -> str:
    return run_study(STUDY, workdir, override, *args)


@pytest.fixture(scope="module")
def study(tmp_path_factory, checkpoints):
    root = tmp_path_factory.mktemp("bq-study")
    mini = write_mini_vqav2(root / "vqav2", n_images=5)
    train = write_question_pool(root / "pool", "train2014", n=240, seed=1)
    val = write_question_pool(root / "pool", "val2014", n=90, seed=2)
    override = {
        "dataset": {"questions": str(mini["questions"]), "annotations": str(mini["annotations"]),
                    "images": str(mini["images"])},
        "severities": [1],
        "basic_questions": {
            "rankers": ["bq_lasso"],
            "pool_files": [{"questions": str(train["questions"]),
                            "annotations": str(train["annotations"])},
                           str(val["questions"])],
        },
        "threads": {"infer": 1},
        "models": {"vilt": {"family": "vqa-classifier", "path_or_id": str(checkpoints["vilt"]),
                            "device": "cpu", "batch_size": 16},
                   # A generative model: VQABQ asks it the chain of questions.
                   "blip": {"family": "blip", "path_or_id": str(tiny_blip(root / "blip")),
                            "device": "cpu", "batch_size": 8,
                            "chain_prompt": "Related: {basic_questions} Question: {question}"}},
    }  # fmt: skip
    workdir = root / "run"
    workdir.mkdir()
    out = snakemake(workdir, override)
    return workdir, override, train, val, out


def test_the_study_runs_to_duckdb_and_the_report(study):
    workdir, override, train, val, _ = study
    results = workdir / "results" / "vqav2-bq"
    # Pool sizes: each file deduplicated, then merged; yes/no by annotations or the rule.
    frames = [pools.read_pool_source(train["questions"], train["annotations"]),
              pools.read_pool_source(val["questions"])]  # fmt: skip
    merged = pools.distinct_pool(pl.concat(frames))
    n_yes = int((merged["yes_no_occurrences"] * 2 >= merged["occurrences"]).sum())
    tables = sorted((results / "questions" / "pool").glob("*.parquet"))
    assert [t.stem for t in tables] == ["file-v2_OpenEnded_mscoco_train2014_questions",
                                        "file-v2_OpenEnded_mscoco_val2014_questions"]  # fmt: skip
    loaded = pools.load_pools(tables)
    assert pools.pool_sizes(loaded) == {"general": merged.height, "yes_no": n_yes}
    assert 22 <= n_yes < merged.height
    log = (workdir / "logs" / "vqav2-bq" / "rank_basic_questions" / "ynbq_lasso.log").read_text()
    assert f"pool: {merged.height} distinct questions, {n_yes} yes/no" in log
    # The yes/no dataset's basic questions are all yes/no pool questions; LASSO in paper
    # mode over the whole pool.
    yes_texts = set(loaded.subset(loaded.yes_no).texts)
    yn = pl.read_parquet(results / "questions" / "rankings" / "ynbq_lasso.parquet")
    assert set(yn["basic_question"]) <= yes_texts
    general = pl.read_parquet(results / "questions" / "rankings" / "bq_lasso.parquet")
    assert not set(general["basic_question"]) <= yes_texts
    assert general["alpha"].to_list() == pytest.approx([1e-6 / (2 * 384)] * general.height)
    # The exported datasets: one row per main question with 21 ranked basic questions.
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        n_q = con.sql("SELECT count(*) FROM questions").fetchall()[0][0]
        overall = con.sql("SELECT * FROM rscore_overall WHERE modality = 'basic_question'").pl()
        acc = con.sql("SELECT model, perturbation, severity, accuracy FROM accuracy "
                      "WHERE modality IN ('clean', 'basic_question')").pl()  # fmt: skip
    for name in ("bq_lasso", "ynbq_lasso"):
        exported = pl.read_parquet(results / "basic_questions" / f"{name}.parquet")
        assert exported.height == n_q
        assert set(exported["basic_questions"].list.len()) == {21}
        assert json.loads((results / "basic_questions" / f"{name}.json").read_text())[0][
            "question_id"] == exported["question_id"][0]  # fmt: skip
    # R_score1 / R_score2: the R_score of the mean drop over the 7 levels, by hand.
    acc = acc.filter(pl.col("model") == "vilt")
    overall = overall.filter(pl.col("model") == "vilt")
    clean = acc.filter(pl.col("perturbation") == "clean")["accuracy"][0]
    for name in ("bq_lasso", "ynbq_lasso"):
        levels = acc.filter(pl.col("perturbation") == name).sort("severity")["accuracy"]
        assert levels.len() == 7
        mean_drop = float((levels - clean).abs().mean())
        row = overall.filter(pl.col("perturbation") == name).row(0, named=True)
        assert row["acc_di"] == pytest.approx(mean_drop * 100)
        assert row["rscore"] == pytest.approx(r_score(clean, clean - mean_drop, 0.05, 20))
    report = (results / "report" / "index.html").read_text()
    assert "R_score1 (general BQ dataset) and R_score2 (yes/no BQ dataset)" in report
    table = pl.read_csv(results / "report" / "tables" / "rscore_datasets.csv")
    lasso = table.filter(pl.col("ranker") == "lasso", pl.col("model") == "vilt").row(0, named=True)
    r1 = overall.filter(pl.col("perturbation") == "bq_lasso")["rscore"][0]
    r2 = overall.filter(pl.col("perturbation") == "ynbq_lasso")["rscore"][0]
    assert lasso["R_score1"] == pytest.approx(r1) and lasso["R_score2"] == pytest.approx(r2)
    # The ranker sentence is true of the comparison table beside it.
    comparison = pl.read_csv(results / "report" / "tables" / "ranker_comparison.csv")
    sentence = ranker_sentence(comparison)
    if sentence is None:
        assert "The most level-controllable noise" not in report
    else:
        assert sentence.replace("'", "&#39;") in re.sub(r"\s+", " ", report)
    assert set(comparison["perturbation"]) == {"bq_lasso", "ynbq_lasso"}
    assert bq.perturbation_name("bq_lasso", "yes_no") == "ynbq_lasso"


def test_adding_a_ranker_reuses_the_pool_embeddings(study):
    workdir, override, *_ = study
    rankers = ["bq_lasso", "bq_rouge"]
    more = {**override, "basic_questions": {**override["basic_questions"], "rankers": rankers}}
    out = snakemake(workdir, more, "-n")
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert "embed_pool" not in jobs and "embed_questions" not in jobs
    assert jobs["rank_basic_questions"] == "2"  # bq_rouge, ynbq_rouge
    assert "chain_questions" not in jobs  # VQABQ's ranker is still bq_lasso


def test_vqabq_tables_follow_algorithm_1_on_the_runs_rankings(study):
    workdir, *_ = study
    results = workdir / "results" / "vqav2-bq"
    ranks = pl.read_parquet(results / "questions" / "rankings" / "bq_lasso.parquet")
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        sel = con.sql("SELECT * FROM vqabq_selection ORDER BY question_id").pl()
        table = con.sql("SELECT * FROM vqabq").pl()
        stats = con.sql("SELECT * FROM vqabq_scores").pl()
        preds = con.sql("SELECT model, perturbation, severity, question_id, score FROM "
                        "predictions WHERE perturbation IN ('clean', 'bq_lasso', 'vqabq_chain')"
                        ).pl()  # fmt: skip
        modalities = con.sql("SELECT DISTINCT modality FROM rscore").pl()["modality"].to_list()
        questions = con.sql("SELECT question_id, question FROM questions").pl()
    assert stats["threshold"].to_list() == [0.60, 0.58, 0.41]
    # Algorithm 1 by hand from the rankings file.
    top = ranks.filter(pl.col("rank") <= 3).sort("question", "rank")
    by_mq = {q: g for (q,), g in top.group_by("question")}
    for row in sel.join(questions, on="question_id").iter_rows(named=True):
        g = by_mq[row["question"]]
        s1, s2, s3 = g["score"].to_list()
        own = (g["source"] == "lasso").all()
        expect = own and s1 >= 0.60 and s2 / s1 >= 0.58 and s3 / s2 >= 0.41
        assert row["selected"] == expect
    chosen = set(sel.filter("selected")["question_id"])
    # The classifier's answers with basic questions are its level 1; BLIP's, its chain.
    for model, subset in (("vilt", "bq_lasso"), ("blip", "vqabq_chain")):
        whole = table.filter(split="all", model=model).row(0, named=True)
        clean = preds.filter(perturbation="clean", model=model)
        with_bq = preds.filter(perturbation=subset, severity=1, model=model)
        mixed = clean.join(with_bq, on=["model", "question_id"], suffix="_bq").with_columns(
            pl.when(pl.col("question_id").is_in(sorted(chosen))).then(pl.col("score_bq"))
            .otherwise(pl.col("score")).alias("vqabq"))  # fmt: skip
        assert whole["questions"] == questions.height and whole["selected"] == len(chosen)
        assert whole["acc_mq"] == pytest.approx(mixed["score"].mean())
        assert whole["acc_vqabq"] == pytest.approx(mixed["vqabq"].mean())
    assert preds.filter(perturbation="vqabq_chain", model="vilt").is_empty()
    assert "vqabq" not in modalities  # no robustness metric of the chain subset
    chain = pl.read_parquet(results / "questions" / "vqabq_chain" / "blip" / "1.parquet")
    row = chain.row(0, named=True)
    bqs = ranks.filter(question=row["original"]).sort("rank")["basic_question"][:3].to_list()
    assert row["perturbed"] == f"Related: {' '.join(bqs)} Question: {row['original']}"
    assert set(table["split"]) == {"all", "held_out_tuned", "held_out_given"}
    held = table.filter(split="held_out_given").row(0, named=True)
    assert held["questions"] == int((~sel["tune"]).sum())
    assert "VQABQ: main questions answered with their basic questions" in (
        results / "report" / "index.html").read_text()  # fmt: skip

"""config/basic-questions.yaml end to end on a VQAv2-format miniature: VQA v1's train2014
and val2014 question files as the pool, named by release as the config names them (the
paper's pool: Open-Ended train2014 with its annotations, Multiple-Choice val2014 by the
question-form rule), VQAv2 val as the main questions, the general and the yes/no
dataset, through DuckDB and the report; then what a change re-runs."""

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
from tests.vqa_v1_data import write_v1_pool
from vqarobust.datasets.miniature import write_mini_vqav2
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
    train = write_v1_pool(root / "pool", "train2014", n=240, seed=1)
    val = write_v1_pool(root / "pool", "val2014", n=90, seed=2, task="MultipleChoice")
    override = {
        "dataset": {
            "questions": str(mini["questions"]),
            "annotations": str(mini["annotations"]),
            "images": str(mini["images"]),
        },
        "severities": [1],
        "controls": [],  # the blank control is the workflow test's
        "basic_questions": {
            "rankers": ["bq_lasso"],
            "pool_files": [
                {"vqa": "v1", "folder": str(root / "pool"), "split": "train2014"},
                {
                    "vqa": "v1",
                    "folder": str(root / "pool"),
                    "split": "val2014",
                    "task": "MultipleChoice",
                    "annotations": False,
                },
            ],
        },
        "threads": {"infer": 1},
        # No attention maps: this test reads none (tests/test_attention.py runs the job
        # for each family that has them).
        "diagnostics": {"attention": {"n": 0}},
        "models": {
            "vilt": {
                "family": "vqa-classifier",
                "path_or_id": str(checkpoints["vilt"]),
                "device": "cpu",
                "batch_size": 16,
            },
            # A generative model: VQABQ asks it the chain of questions (the
            # classifier gets the MQ followed by its basic questions).
            "blip": {
                "family": "blip",
                "path_or_id": str(tiny_blip(root / "blip")),
                "device": "cpu",
                "batch_size": 8,
                "chain_prompt": "Related: {basic_questions} Question: {question}",
            },
        },
    }
    workdir = root / "run"
    workdir.mkdir()
    out = snakemake(workdir, override)
    return workdir, override, train, val, out


def test_the_study_runs_to_duckdb_and_the_report(study):
    workdir, override, train, val, _ = study
    results = workdir / "results" / "vqav2-bq"
    # Pool sizes: each file deduplicated, then merged; yes/no by annotations or the rule.
    frames = [
        pools.read_pool_source(train["questions"], train["annotations"]),
        pools.read_pool_source(val["questions"]),
    ]
    merged = pools.distinct_pool(pl.concat(frames))
    n_yes = int((merged["yes_no_occurrences"] * 2 >= merged["occurrences"]).sum())
    tables = sorted((results / "questions" / "pool").glob("*.parquet"))
    assert [t.stem for t in tables] == [
        "file-MultipleChoice_mscoco_val2014_questions",
        "file-OpenEnded_mscoco_train2014_questions",
    ]
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
    # exclude_main: run, the paper's disjoint pool: no main question of the run (after
    # normalization) is ever a basic question, of its own or of another main question.
    mains = {bq.normalize_question(q) for q in general["question"]}
    assert not mains & {bq.normalize_question(q) for q in general["basic_question"]}
    rank_log = workdir / "logs" / "vqav2-bq" / "rank_basic_questions" / "bq_lasso.log"
    assert "questions that are main questions of the run" in rank_log.read_text()
    # The exported datasets: one row per main question with 21 ranked basic questions.
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        n_q = con.sql("SELECT count(*) FROM questions").fetchall()[0][0]
        overall = con.sql("SELECT * FROM rscore_overall WHERE modality = 'basic_question'").pl()
        acc = con.sql(
            "SELECT model, perturbation, severity, accuracy FROM accuracy "
            "WHERE modality IN ('clean', 'basic_question')"
        ).pl()
    for name in ("bq_lasso", "ynbq_lasso"):
        exported = pl.read_parquet(results / "basic_questions" / f"{name}.parquet")
        assert exported.height == n_q
        assert set(exported["basic_questions"].list.len()) == {21}
        assert (
            json.loads((results / "basic_questions" / f"{name}.json").read_text())[0]["question_id"]
            == exported["question_id"][0]
        )
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


def test_the_lasso_mode_is_named_in_rankings_datasets_rscore_and_report(study):
    workdir, *_ = study
    results = workdir / "results" / "vqav2-bq"
    paper = "LASSO, paper mode: unconstrained, lambda 1e-06, the whole pool (LARS)"
    removed = "every main question removed from the pool"
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        ranking = dict(
            con.sql(
                "SELECT DISTINCT perturbation, ranking FROM rscore_overall "
                "WHERE modality = 'basic_question'"
            ).fetchall()
        )
    on = f"{paper} on all-MiniLM-L6-v2 embeddings"
    assert ranking == {
        "bq_lasso": f"{on}; {removed}",
        "ynbq_lasso": f"{on}; yes/no pool; {removed}",
    }
    for name in ("bq_lasso", "ynbq_lasso"):
        ranks = pl.read_parquet(results / "questions" / "rankings" / f"{name}.parquet")
        exported = pl.read_parquet(results / "basic_questions" / f"{name}.parquet")
        assert set(ranks["method"]) == set(exported["method"])
        assert set(ranks["method"]) == {
            ranking[name].replace(" on all-MiniLM-L6-v2 embeddings", "")
        }
    report = (results / "report" / "index.html").read_text()
    assert "How each was ranked" in report and paper in report


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
        preds = con.sql(
            "SELECT model, perturbation, severity, question_id, score FROM "
            "predictions WHERE perturbation IN ('clean', 'vqabq_chain') "
            "ORDER BY model, perturbation, severity, question_id"
        ).pl()
        modalities = con.sql("SELECT DISTINCT modality FROM rscore").pl()["modality"].to_list()
        questions = con.sql("SELECT question_id, question FROM questions").pl()
        con_counts = con.sql("SELECT * FROM vqabq_counts").pl()
    assert stats["threshold"].to_list() == [0.60, 0.58, 0.41]
    # Algorithm 1 by hand from the rankings file: nested strict tests on own positive scores.
    top = ranks.filter(pl.col("rank") <= 3).sort("question", "rank")
    by_mq = {q: g for (q,), g in top.group_by("question")}
    for row in sel.join(questions, on="question_id").iter_rows(named=True):
        g = by_mq[row["question"]]
        scores, own = g["score"].to_list(), (g["source"] == "lasso").to_list()
        tests = [
            scores[0] > 0.60,
            scores[1] / scores[0] > 0.58 if scores[0] else False,
            scores[2] / scores[1] > 0.41 if scores[1] else False,
        ]
        expect = 0
        for i in range(3):
            if not (own[i] and scores[i] > 0 and tests[i]):
                break
            expect += 1
        assert row["n_bq"] == expect and row["selected"] == (expect > 0)
    kept = dict(zip(sel["question_id"], sel["n_bq"], strict=True))
    counts = con_counts.filter(split="all")
    assert counts.sort("n_bq")["questions"].to_list() == [
        sum(1 for n in kept.values() if n == k) for k in range(4)
    ]
    # Every model answers each MQ with its first 1, 2 and 3 basic questions; VQABQ takes
    # the answer at the number Algorithm 1 keeps.
    for model in ("vilt", "blip"):
        whole = table.filter(split="all", model=model).row(0, named=True)
        clean = preds.filter(perturbation="clean", model=model)
        chain = preds.filter(perturbation="vqabq_chain", model=model)
        assert sorted(set(chain["severity"])) == [1, 2, 3]
        at = {(r["question_id"], r["severity"]): r["score"] for r in chain.iter_rows(named=True)}
        mixed = [
            at[(q, kept[q])] if kept[q] else sc
            for q, sc in zip(clean["question_id"], clean["score"], strict=True)
        ]
        assert whole["questions"] == questions.height
        assert whole["selected"] == sum(1 for n in kept.values() if n)
        assert whole["acc_mq"] == pytest.approx(clean["score"].mean())
        assert whole["acc_vqabq"] == pytest.approx(sum(mixed) / len(mixed))
    assert "vqabq" not in modalities  # no robustness metric of the chain subset
    folder = results / "questions" / "vqabq_chain"
    for n in (1, 2, 3):
        row = pl.read_parquet(folder / "blip" / f"{n}.parquet").row(0, named=True)
        bqs = ranks.filter(question=row["original"]).sort("rank")["basic_question"][:n].to_list()
        assert row["perturbed"] == f"Related: {' '.join(bqs)} Question: {row['original']}"
        # The classifier gets the paper's direct concatenation: the MQ, then the BQs.
        row = pl.read_parquet(folder / "vilt" / f"{n}.parquet").row(0, named=True)
        assert row["perturbed"] == " ".join([row["original"], *bqs])
    assert set(table["split"]) == {"all", "held_out_tuned", "held_out_given"}
    held = table.filter(split="held_out_given").row(0, named=True)
    assert held["questions"] == int((~sel["tune"]).sum())
    assert (
        "VQABQ: main questions answered with their basic questions"
        in (results / "report" / "index.html").read_text()
    )

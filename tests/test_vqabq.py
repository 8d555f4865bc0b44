"""VQABQ (the basic-question paper's Algorithm 1 and Tables 5-7) by hand."""

import numpy as np
import polars as pl
import pytest

from vqarobust.metrics import vqabq


def _rankings(rows):
    """rows: (mq, [(score, source) x 3])"""
    out = []
    for mq, top in rows:
        for rank, (score, source) in enumerate(top, 1):
            out.append({"question": mq, "ranker": "bq_lasso", "rank": rank,
                        "basic_question": f"{mq} bq{rank}", "score": score, "source": source,
                        "alpha": 1e-3})  # fmt: skip
    return pl.DataFrame(out)


# Scores built to pass or fail each threshold (paper: 0.60, 0.58, 0.41).
CASES = [
    ("passes?", [(0.80, "lasso"), (0.50, "lasso"), (0.25, "lasso")], True),  # .625, .5
    ("low score1?", [(0.59, "lasso"), (0.58, "lasso"), (0.57, "lasso")], False),
    ("low ratio2?", [(0.90, "lasso"), (0.50, "lasso"), (0.49, "lasso")], False),  # .556
    ("low ratio3?", [(0.70, "lasso"), (0.60, "lasso"), (0.24, "lasso")], False),  # .40
    ("at the edges?", [(0.60, "lasso"), (0.348, "lasso"), (0.14268, "lasso")], True),
    ("cosine fill?", [(0.90, "lasso"), (0.80, "lasso"), (0.70, "cosine")], False),
]


def _scores():
    questions = pl.DataFrame({"question_id": list(range(len(CASES))),
                              "question": [c[0] for c in CASES]})  # fmt: skip
    return vqabq.top3(_rankings([(c[0], c[1]) for c in CASES]), questions)


def test_algorithm_1_by_hand():
    scores = _scores()
    assert scores["ratio2"][0] == pytest.approx(0.625) and scores["ratio3"][0] == pytest.approx(0.5)
    got = vqabq.select(scores, vqabq.PAPER_THRESHOLDS).to_list()
    assert got == [c[2] for c in CASES]
    # Lower thresholds let the near misses through, but never a fill.
    loose = vqabq.select(scores, (0.5, 0.5, 0.3)).to_list()
    assert loose == [True, True, True, True, True, False]


def test_table_5_statistics_and_auto_thresholds():
    scores = _scores()
    stats = vqabq.score_statistics(scores)
    own = [c for c in CASES if all(src == "lasso" for _, src in c[1])]
    s1 = np.array([c[1][0][0] for c in own])
    r2 = np.array([c[1][1][0] / c[1][0][0] for c in own])
    assert stats["n"].to_list() == [5, 5, 5]
    assert stats["avg"][0] == pytest.approx(s1.mean()) and stats["std"][0] == pytest.approx(
        s1.std(ddof=1))  # fmt: skip
    assert stats["avg"][1] == pytest.approx(r2.mean())
    auto = vqabq.thresholds("auto", stats)
    assert auto[0] == pytest.approx(s1.mean() - s1.std(ddof=1))
    assert vqabq.thresholds([0.6, 0.58, 0.41], stats) == (0.6, 0.58, 0.41)
    with pytest.raises(ValueError, match=r"\(s1, s2, s3\)"):
        vqabq.thresholds([0.6, 0.5], stats)


def test_tables_6_and_7_by_hand():
    # Two models, four MQs, MQs 0 and 2 selected.
    selected = pl.DataFrame({"question_id": [0, 1, 2, 3], "selected": [True, False, True, False]})
    clean = pl.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "question_id": [0, 1, 2, 3] * 2,
                          "score": [0.0, 1.0, 1.0, 0.3, 1.0, 1.0, 0.0, 0.0]})  # fmt: skip
    with_bq = pl.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "question_id": [0, 1, 2, 3] * 2,
                            "score": [1.0, 0.0, 0.6, 0.0, 1.0, 0.0, 0.0, 1.0]})  # fmt: skip
    t = vqabq.accuracy_table(clean, with_bq, selected, (0.6, 0.58, 0.41))
    a = t.filter(model="a").row(0, named=True)
    # a: VQABQ scores 1.0, 1.0, 0.6, 0.3 (unselected keep clean) -> 2.9 / 4.
    assert a["questions"] == 4 and a["selected"] == 2 and a["share_selected"] == 0.5
    assert a["acc_mq"] == pytest.approx(2.3 / 4) and a["acc_vqabq"] == pytest.approx(2.9 / 4)
    assert a["acc_mq_selected"] == pytest.approx(0.5)
    assert a["acc_vqabq_selected"] == pytest.approx(0.8)
    assert (a["gained"], a["lost"]) == (1, 1) and a["net_questions"] == pytest.approx(0.6)
    b = t.filter(model="b").row(0, named=True)
    # b: selected MQs unchanged (1 -> 1, 0 -> 0): nothing gained or lost.
    assert (b["gained"], b["lost"], b["net_questions"]) == (0, 0, 0.0)
    assert b["acc_vqabq"] == pytest.approx(b["acc_mq"]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no answer with their basic questions"):
        vqabq.accuracy_table(clean, with_bq.filter(pl.col("question_id") != 2), selected,
                             (0.6, 0.58, 0.41))  # fmt: skip


def test_grid_search_tunes_on_one_half_and_reports_on_the_other():
    rng = np.random.default_rng(0)
    n = 200
    rows = []
    for i in range(n):
        s1 = float(rng.uniform(0.2, 1.0))
        rows.append((f"q{i}?", [(s1, "lasso"), (s1 * 0.7, "lasso"), (s1 * 0.35, "lasso")]))
    questions = pl.DataFrame({"question_id": list(range(n)), "question": [r[0] for r in rows]})
    scores = vqabq.top3(_rankings(rows), questions)
    # Basic questions help exactly when score1 >= 0.7: the best s1 on the grid is 0.7.
    helps = scores["score1"].to_numpy() >= 0.7
    clean = pl.DataFrame({"model": "m", "question_id": list(range(n)), "score": 0.0})
    with_bq = clean.with_columns(pl.Series("score", np.where(helps, 1.0, -0.0) - (~helps) * 1.0))
    tune = vqabq.tune_split(list(range(n)), seed=0)
    assert 0.35 < tune.mean() < 0.65
    assert (vqabq.tune_split(list(range(n)), seed=0) == tune).all()  # seeded per item
    best = vqabq.grid_search(scores, clean, with_bq.with_columns(pl.col("score").clip(0, 1)),
                             tune)  # fmt: skip
    assert best[0] == pytest.approx(0.7)
    scored = pl.concat([
        clean.with_columns(pl.lit("clean").alias("perturbation"), pl.lit(0).alias("severity")),
        with_bq.with_columns(pl.col("score").clip(0, 1), pl.lit("bq_lasso").alias("perturbation"),
                             pl.lit(1).alias("severity")),
    ])  # fmt: skip
    tables = vqabq.vqabq_tables(scored, questions, _rankings(rows), "bq_lasso", grid=True)
    v = tables["vqabq"]
    assert set(v["split"]) == {"all", "held_out_tuned", "held_out_given"}
    held = v.filter(split="held_out_tuned").row(0, named=True)
    assert held["questions"] == int((~tune).sum()) and held["s1"] == pytest.approx(0.7)
    assert held["lost"] == 0 and held["gained"] == int((helps & ~tune).sum())
    assert tables["vqabq_selection"]["tune"].to_list() == tune.tolist()


def test_the_chain_of_questions_puts_the_basic_questions_first():
    from vqarobust.text import ranking as bq

    text = bq.chain_question("What color is it? ", ["Is it red?", " Is it blue?"])
    assert text == "Is it red? Is it blue? What color is it?"
    custom = bq.chain_question(
        "Q?", ["A?", "B?"], "Context: {basic_questions}\nQuestion: {question}"
    )
    assert custom == "Context: A? B?\nQuestion: Q?"
    for bad in ("{question}", "{basic_questions} {question} {answer}", "no fields"):
        with pytest.raises(ValueError, match="must contain"):
            bq.chain_question("Q?", ["A?"], bad)


def test_chain_prompt_is_a_generative_familys_key(tmp_path):
    import yaml

    from tests.conftest import REPO
    from vqarobust.config import ConfigError, validate_config

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    vilt = base["models"]["vilt-tiny"]
    with pytest.raises(ConfigError, match="chain_prompt: applies to family"):
        validate_config(
            {
                **base,
                "models": {"vilt-tiny": {**vilt, "chain_prompt": "{basic_questions} {question}"}},
            }
        )
    blip = {
        "family": "blip",
        "path_or_id": str(tmp_path),
        "device": "cpu",
        "chain_prompt": "{question}",
    }
    with pytest.raises(ConfigError, match="models.b.chain_prompt: a chain prompt must contain"):
        validate_config({**base, "models": {"b": blip}})

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
            out.append(
                {
                    "question": mq,
                    "ranker": "bq_lasso",
                    "rank": rank,
                    "basic_question": f"{mq} bq{rank}",
                    "score": score,
                    "source": source,
                    "alpha": 1e-3,
                }
            )
    return pl.DataFrame(out)


# Scores built to pass or fail each step at (0.60, 0.58, 0.41), with the number of basic
# questions Algorithm 1 keeps: nested strict tests, stopping at the first that fails.
CASES = [
    ("passes?", [(0.80, "lasso"), (0.50, "lasso"), (0.25, "lasso")], 3),  # .625, .5
    ("low score1?", [(0.59, "lasso"), (0.58, "lasso"), (0.57, "lasso")], 0),
    ("low ratio2?", [(0.90, "lasso"), (0.50, "lasso"), (0.49, "lasso")], 1),  # .556
    ("low ratio3?", [(0.70, "lasso"), (0.60, "lasso"), (0.24, "lasso")], 2),  # .40
    # Strict: score1 = s1 keeps nothing, whatever the ratios.
    ("at the edges?", [(0.60, "lasso"), (0.348, "lasso"), (0.14268, "lasso")], 0),
    ("just above?", [(0.6001, "lasso"), (0.35, "lasso"), (0.1436, "lasso")], 3),
    ("cosine fill?", [(0.90, "lasso"), (0.80, "lasso"), (0.70, "cosine")], 2),
    ("fill first?", [(0.90, "cosine"), (0.80, "lasso"), (0.70, "lasso")], 0),
    # A ratio that passes after a failed step does not count: the chain has stopped.
    ("gap?", [(0.90, "lasso"), (0.10, "lasso"), (0.09, "lasso")], 1),  # .11, .9
]


def _scores():
    questions = pl.DataFrame(
        {"question_id": list(range(len(CASES))), "question": [c[0] for c in CASES]}
    )
    return vqabq.top3(_rankings([(c[0], c[1]) for c in CASES]), questions)


def test_algorithm_1_keeps_one_two_or_three_basic_questions():
    """The authors' code (docs/text.md, "VQABQ"): BQ1 when score1 > s1, then BQ2 when
    score2/score1 > s2, then BQ3 when score3/score2 > s3, each after the one before."""
    scores = _scores()
    assert scores["ratio2"][0] == pytest.approx(0.625) and scores["ratio3"][0] == pytest.approx(0.5)
    got = vqabq.n_basic(scores, vqabq.PAPER_THRESHOLDS).to_list()
    assert got == [c[2] for c in CASES]
    assert vqabq.select(scores, vqabq.PAPER_THRESHOLDS).to_list() == [c[2] > 0 for c in CASES]
    # Lower thresholds let the near misses through, but never past a fill.
    loose = vqabq.n_basic(scores, (0.5, 0.5, 0.3)).to_list()
    assert loose == [3, 3, 3, 3, 3, 3, 2, 0, 1]
    # Strict at the second and third step too: ratios exactly at the threshold (0.4/0.8
    # and 0.2/0.4 are exactly 0.5 in floating point) stop the chain there.
    edge_rows = [
        ("r2 edge?", [(0.8, "lasso"), (0.4, "lasso"), (0.2, "lasso")]),
        ("r3 edge?", [(0.8, "lasso"), (0.6, "lasso"), (0.3, "lasso")]),
    ]
    names = pl.DataFrame({"question_id": [0, 1], "question": [r[0] for r in edge_rows]})
    edges = vqabq.top3(_rankings(edge_rows), names)
    assert vqabq.n_basic(edges, (0.5, 0.5, 0.5)).to_list() == [1, 2]
    counts = vqabq.count_table(pl.Series(got, dtype=pl.Int8), vqabq.PAPER_THRESHOLDS)
    assert counts["questions"].to_list() == [3, 2, 2, 2]
    assert counts["share"].sum() == pytest.approx(1.0)


def test_table_5_statistics_and_auto_thresholds():
    scores = _scores()
    stats = vqabq.score_statistics(scores)
    own = [c for c in CASES if all(src == "lasso" for _, src in c[1])]
    s1 = np.array([c[1][0][0] for c in own])
    r2 = np.array([c[1][1][0] / c[1][0][0] for c in own])
    assert stats["n"].to_list() == [len(own)] * 3 == [7, 7, 7]
    assert stats["avg"][0] == pytest.approx(s1.mean()) and stats["std"][0] == pytest.approx(
        s1.std(ddof=1)
    )
    assert stats["avg"][1] == pytest.approx(r2.mean())
    auto = vqabq.thresholds("auto", stats)
    assert auto[0] == pytest.approx(s1.mean() - s1.std(ddof=1))
    assert vqabq.thresholds([0.6, 0.58, 0.41], stats) == (0.6, 0.58, 0.41)
    with pytest.raises(ValueError, match=r"\(s1, s2, s3\)"):
        vqabq.thresholds([0.6, 0.5], stats)


def test_tables_6_and_7_by_hand():
    # Two models, four MQs: MQ 0 keeps 1 basic question, MQ 2 keeps 3, the others none.
    selected = pl.DataFrame({"question_id": [0, 1, 2, 3], "n_bq": [1, 0, 3, 0]})
    clean = pl.DataFrame(
        {
            "model": ["a"] * 4 + ["b"] * 4,
            "question_id": [0, 1, 2, 3] * 2,
            "score": [0.0, 1.0, 1.0, 0.3, 1.0, 1.0, 0.0, 0.0],
        }
    )
    # Answers with the first n basic questions; only the n each MQ keeps may count.
    rows = []
    for model, by_n in (
        ("a", {1: [1.0, 0.0, 0.0, 0.0], 2: [0.0] * 4, 3: [0.0, 0.0, 0.6, 0.0]}),
        ("b", {1: [1.0, 0.0, 1.0, 1.0], 2: [1.0] * 4, 3: [0.0, 0.0, 0.0, 1.0]}),
    ):
        for n, values in by_n.items():
            rows += [(model, q, n, v) for q, v in enumerate(values)]
    with_bq = pl.DataFrame(rows, schema=["model", "question_id", "n_bq", "score"], orient="row")
    t = vqabq.accuracy_table(clean, with_bq, selected, (0.6, 0.58, 0.41))
    a = t.filter(model="a").row(0, named=True)
    # a: VQABQ scores 1.0 (n=1), 1.0, 0.6 (n=3), 0.3 (unselected keep clean) -> 2.9 / 4.
    assert a["questions"] == 4 and a["selected"] == 2 and a["share_selected"] == 0.5
    assert a["acc_mq"] == pytest.approx(2.3 / 4) and a["acc_vqabq"] == pytest.approx(2.9 / 4)
    assert a["acc_mq_selected"] == pytest.approx(0.5)
    assert a["acc_vqabq_selected"] == pytest.approx(0.8)
    assert (a["gained"], a["lost"]) == (1, 1) and a["net_questions"] == pytest.approx(0.6)
    b = t.filter(model="b").row(0, named=True)
    # b: selected MQs unchanged (1 -> 1 at n=1, 0 -> 0 at n=3): nothing gained or lost.
    assert (b["gained"], b["lost"], b["net_questions"]) == (0, 0, 0.0)
    assert b["acc_vqabq"] == pytest.approx(b["acc_mq"]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no answer with their basic questions"):
        vqabq.accuracy_table(
            clean, with_bq.filter(pl.col("n_bq") != 3), selected, (0.6, 0.58, 0.41)
        )


def _random_scores(n: int, seed: int, low: float, ratio3: float):
    """n MQs with a uniform score1 in [low, 1), score2 = 0.7 score1, score3 = ratio3 score1:
    (rows, questions, top3 scores)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        s1 = float(rng.uniform(low, 1.0))
        rows.append((f"q{i}?", [(s1, "lasso"), (s1 * 0.7, "lasso"), (s1 * ratio3, "lasso")]))
    questions = pl.DataFrame({"question_id": list(range(n)), "question": [r[0] for r in rows]})
    return rows, questions, vqabq.top3(_rankings(rows), questions)


def test_grid_search_tunes_on_one_half_and_reports_on_the_other():
    n = 200
    rows, questions, scores = _random_scores(n, seed=0, low=0.2, ratio3=0.35)
    # Basic questions help exactly when score1 >= 0.7: the best s1 on the grid is 0.7.
    helps = scores["score1"].to_numpy() >= 0.7
    clean = pl.DataFrame({"model": "m", "question_id": list(range(n)), "score": 0.0})
    with_bq = clean.with_columns(pl.Series("score", np.where(helps, 1.0, -0.0) - (~helps) * 1.0))
    tune = vqabq.tune_split(list(range(n)), seed=0)
    assert 0.35 < tune.mean() < 0.65
    assert (vqabq.tune_split(list(range(n)), seed=0) == tune).all()  # seeded per item
    # The same answer whatever the number of basic questions (n = 1, 2, 3).
    by_n = pl.concat(
        [
            with_bq.with_columns(pl.col("score").clip(0, 1), pl.lit(n).alias("n_bq"))
            for n in (1, 2, 3)
        ]
    )
    best = vqabq.grid_search(scores, clean, by_n, tune)
    assert best[0] == pytest.approx(0.7)
    scored = pl.concat(
        [
            clean.with_columns(pl.lit("clean").alias("perturbation"), pl.lit(0).alias("severity")),
            by_n.select(
                "model",
                "question_id",
                "score",
                pl.lit("vqabq_chain").alias("perturbation"),
                pl.col("n_bq").alias("severity"),
            ),
        ],
        how="diagonal",
    )
    tables = vqabq.vqabq_tables(scored, questions, _rankings(rows), "bq_lasso", grid=True)
    v = tables["vqabq"]
    assert set(v["split"]) == {"all", "held_out_tuned", "held_out_given"}
    held = v.filter(split="held_out_tuned").row(0, named=True)
    assert held["questions"] == int((~tune).sum()) and held["s1"] == pytest.approx(0.7)
    assert held["lost"] == 0 and held["gained"] == int((helps & ~tune).sum())
    counts = tables["vqabq_counts"]
    assert set(counts["split"]) == {"all", "held_out_tuned", "held_out_given"}
    for split, part in counts.group_by("split"):
        assert part["questions"].sum() == (n if split[0] == "all" else int((~tune).sum()))
    assert tables["vqabq_selection"]["tune"].to_list() == tune.tolist()


def test_grid_search_weighs_each_number_of_basic_questions():
    """Basic questions help with one of them and hurt with two or three: the grid must
    keep exactly one (s1 below every score1, s2 above every score2/score1), so each MQ's
    gain is read at the number it keeps."""
    n = 120
    _, _, scores = _random_scores(n, seed=1, low=0.3, ratio3=0.6)
    clean = pl.DataFrame({"model": "m", "question_id": list(range(n)), "score": 0.5})
    by_n = pl.concat(
        [
            clean.with_columns(
                pl.lit(1.0 if k == 1 else 0.0).alias("score"), pl.lit(k).alias("n_bq")
            )
            for k in (1, 2, 3)
        ]
    )
    tune = vqabq.tune_split(list(range(n)), seed=0)
    s1, s2, _ = vqabq.grid_search(scores, clean, by_n, tune)
    assert s1 < scores["score1"].min() and s2 >= 0.7  # every MQ keeps one basic question
    assert set(vqabq.n_basic(scores, (s1, s2, 1.0)).to_list()) == {1}


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

"""Basic-question ranking (LASSO, cosine, BLEU) and the noise levels built from it."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust import store, text
from vqarobust.materialize.questions import (
    basic_question_sets,
    build_pool,
    rank_basic_questions,
)
from vqarobust.text import ranking as bq


def _designed_encoder(vectors: dict[str, np.ndarray]):
    """An encoder over hand-made unit vectors, so the best matches are known."""

    def encode(sentences):
        return np.array([vectors[s] / np.linalg.norm(vectors[s]) for s in sentences], np.float32)

    return encode


def _hand_made_pool():
    rng = np.random.default_rng(0)
    d = 16
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
    vectors = {f"candidate {i}?": basis[:, i] for i in range(12)}
    # The main question is 0.6 candidate 3 + 0.3 candidate 7 + 0.1 candidate 1.
    vectors["main?"] = 0.6 * basis[:, 3] + 0.3 * basis[:, 7] + 0.1 * basis[:, 1]
    return vectors


def test_lasso_finds_the_known_best_matches_in_weight_order():
    vectors = _hand_made_pool()
    pool = [q for q in vectors if q != "main?"] + ["main?", "Main ?"]
    vectors["Main ?"] = vectors["main?"]
    table = bq.rank_table(
        ["main?"],
        pool,
        ["bq_lasso"],
        bq.RankSettings(3, alpha=1e-6),
        encode=_designed_encoder(vectors),
    )
    top = table.sort("rank")
    assert top["basic_question"].to_list() == ["candidate 3?", "candidate 7?", "candidate 1?"]
    norm = np.linalg.norm(vectors["main?"])
    assert top["score"].to_list() == pytest.approx([0.6 / norm, 0.3 / norm, 0.1 / norm], rel=1e-2)
    assert set(top["source"]) == {"lasso"}
    # Neither the main question nor its normalized twin is ever a basic question.
    assert not {"main?", "Main ?"} & set(table["basic_question"])


def test_the_papers_disjoint_pool_removes_every_main_question_of_the_run():
    """basic_questions.exclude_main: own keeps the other main questions as candidates (a
    main question's twin in the pool is still a basic question of the others); run removes
    every main question of the run (and its normalized twins) before ranking."""
    vectors = _hand_made_pool()
    vectors["Candidate 3 ?"] = vectors["candidate 3?"]
    pool = list(vectors)
    mqs = ["main?", "candidate 3?"]
    encode = _designed_encoder(vectors)
    own = bq.rank_table(mqs, pool, ["bq_cosine"], bq.RankSettings(6), encode=encode)
    main_first = own.filter(question="main?").sort("rank")["basic_question"].to_list()
    assert main_first[0] in ("candidate 3?", "Candidate 3 ?")  # another main question
    run = bq.rank_table(
        mqs, pool, ["bq_cosine"], bq.RankSettings(6, exclude_main="run"), encode=encode
    )
    assert not {"main?", "candidate 3?", "Candidate 3 ?"} & set(run["basic_question"])
    assert run.filter(question="main?").sort("rank")["basic_question"][0] == "candidate 7?"
    with pytest.raises(ValueError, match="exclude_main is own or run"):
        bq.rank_table(
            mqs, pool, ["bq_cosine"], bq.RankSettings(6, exclude_main="all"), encode=encode
        )


def test_lasso_fills_by_cosine_when_too_few_weights_are_nonzero():
    vectors = _hand_made_pool()
    pool = [q for q in vectors if q != "main?"]
    table = bq.rank_table(
        ["main?"],
        pool,
        ["bq_lasso"],
        bq.RankSettings(6, alpha=1e-6),
        encode=_designed_encoder(vectors),
    )
    assert table["source"].to_list() == ["lasso"] * 3 + ["cosine"] * 3
    # Lowered from 1e-6 four times before the fill.
    assert table["alpha"][0] == pytest.approx(1e-10)


def test_cosine_and_bleu_rank_by_their_own_similarity():
    pool = [
        "what color is the shape?",
        "what colour is the shape?",
        "is there a circle?",
        "how many dogs are there?",
        "what shape is in the image?",
        "is the shape red?",
    ]
    vectors = {q: np.eye(8)[i] for i, q in enumerate(pool)}
    vectors["what color is the circle?"] = np.eye(8)[0] * 0.9 + np.eye(8)[2] * 0.1
    table = bq.rank_table(
        ["what color is the circle?"],
        pool,
        ["bq_cosine", "bq_bleu"],
        bq.RankSettings(3),
        encode=_designed_encoder(vectors),
    )
    cosine = table.filter(ranker="bq_cosine").sort("rank")["basic_question"].to_list()
    assert cosine[:2] == ["what color is the shape?", "is there a circle?"]
    bleu = table.filter(ranker="bq_bleu").sort("rank")["basic_question"].to_list()
    assert bleu[0] == "what color is the shape?"


@pytest.mark.parametrize(
    "reference, hypothesis",
    [
        ("what color is the circle?", "what color is the shape?"),
        ("is there a red circle in the image?", "is there a blue triangle?"),
        ("how many dogs?", "how many people are on the bus?"),
        ("why?", "what is this?"),
    ],
)
def test_bleu_is_coco_captions_and_its_add_one_option_nltks(reference, hypothesis):
    """The default is pycocoevalcap's per-sentence BLEU-4 (no smoothing); add_one is nltk's
    method2."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from pycocoevalcap.bleu.bleu import Bleu

    pool = bq.Candidates([hypothesis], np.array([hypothesis], dtype=object), np.zeros((1, 2)))
    ours, _, _ = bq.bleu_scores(reference, np.zeros(2), pool, np.array([0]))
    tokens = {0: [" ".join(bq.bleu_tokens(reference))]}, {0: [" ".join(bq.bleu_tokens(hypothesis))]}
    _, per_sentence = Bleu(4).compute_score(*tokens, verbose=0)
    assert ours[0] == pytest.approx(per_sentence[3][0], rel=1e-9)
    smoothed, _, _ = bq.bleu_scores(
        reference,
        np.zeros(2),
        pool,
        np.array([0]),
        settings=bq.RankSettings(bleu_smoothing="add_one"),
    )
    theirs = sentence_bleu(
        [bq.bleu_tokens(reference)],
        bq.bleu_tokens(hypothesis),
        smoothing_function=SmoothingFunction().method2,
    )
    assert smoothed[0] == pytest.approx(theirs)


def test_minilm_ranks_paraphrases_first():
    pool = [
        "what colour is the shape?",
        "how many dogs are on the bus?",
        "what is the shape's color?",
        "is it raining?",
        "where is the cat sleeping?",
        "what color is the shape?",
    ]
    lists = text.basic_questions(["what color is the shape?"], pool, k=3, ranker="cosine")
    assert lists[0][:2] == ["what colour is the shape?", "what is the shape's color?"]
    assert "what color is the shape?" not in lists[0]
    lasso = text.basic_questions(["what color is the shape?"], pool, k=3, ranker="lasso")
    assert len(lasso[0]) == 3 and "what color is the shape?" not in lasso[0]


def test_a_pool_smaller_than_k_is_an_error():
    vectors = _hand_made_pool()
    with pytest.raises(ValueError, match="fewer than k=21"):
        bq.rank_table(["main?"], list(vectors), ["bq_cosine"], encode=_designed_encoder(vectors))
    with pytest.raises(ValueError, match="multiple of 3"):
        bq.rank_table(["main?"], list(vectors), ["bq_cosine"], bq.RankSettings(4))
    with pytest.raises(KeyError, match="known:"):
        bq.rank_table(["main?"], list(vectors), ["bq_random"], bq.RankSettings(3))


def test_noise_levels_append_the_ranked_basic_questions(tmp_path):
    texts = ["what color is the shape?", "is there a circle?"]
    questions = [
        {
            "question_id": i,
            "image_id": 1,
            "question": q,
            "answers": ["x"] * 10,
            "question_type": "what",
            "answer_type": "other",
        }
        for i, q in enumerate(texts)
    ]
    import pyarrow as pa

    qpath = tmp_path / "q.parquet"
    store.write_table(pa.Table.from_pylist(questions, schema=store.QUESTION_SCHEMA), qpath)
    pool = tmp_path / "pool.parquet"
    extra = [
        {**questions[0], "question_id": 10 + i, "question": f"is the shape number {i} red?"}
        for i in range(8)
    ]
    store.write_table(pa.Table.from_pylist(questions + extra, schema=store.QUESTION_SCHEMA), pool)
    ranks = tmp_path / "rankings.parquet"
    pool_table = tmp_path / "pool-table.parquet"
    assert build_pool(pool, pool_table) == 10  # distinct questions
    n = rank_basic_questions(
        qpath, [pool_table], ranks, ["bq_cosine", "bq_bleu"], bq.RankSettings(6)
    )
    assert n == 2 * 2 * 6
    out = {1: tmp_path / "1.parquet", 2: tmp_path / "2.parquet"}
    basic_question_sets(qpath, ranks, "bq_cosine", out)
    table = pl.read_parquet(ranks).filter(ranker="bq_cosine")
    for level, path in out.items():
        got = pl.read_parquet(path)
        assert got.columns == store.QUESTION_SET_SCHEMA.names
        assert set(got["severity"]) == {level} and set(got["perturbation"]) == {"bq_cosine"}
        for row in got.iter_rows(named=True):
            basic = (
                table.filter(pl.col("question") == row["original"])
                .filter(pl.col("rank").is_between(3 * level - 2, 3 * level))
                .sort("rank")["basic_question"]
                .to_list()
            )
            assert row["perturbed"] == " ".join([row["original"], *basic])
            assert row["changed"]
    with pytest.raises(ValueError, match="holds no rankings of bq_lasso"):
        basic_question_sets(qpath, ranks, "bq_lasso", out)


WORDS = ["what", "color", "is", "the", "the", "circle", "red", "how", "many", "dogs"]


@settings(max_examples=60, deadline=None)
@given(
    reference=st.lists(st.sampled_from(WORDS), min_size=1, max_size=9),
    hypotheses=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=9), min_size=1, max_size=5
    ),
    n=st.integers(1, 4),
)
def test_bleu_1_to_4_match_coco_caption_and_nltk_with_repeated_words(reference, hypotheses, n):
    """Clipped counts (a word the hypothesis repeats counts at most as often as in the
    reference) and the brevity penalty: pycocoevalcap's per-sentence BLEU-n without
    smoothing (the default) and nltk's sentence_bleu with add-one smoothing above unigrams
    (the named option)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from pycocoevalcap.bleu.bleu import Bleu

    texts = [" ".join(h) for h in hypotheses]
    pool = bq.Candidates(texts, np.array(texts, dtype=object), np.zeros((len(texts), 2)))
    ours = bq.bleu(" ".join(reference), pool, np.arange(len(texts)), n)
    refs = {i: [" ".join(reference)] for i in range(len(texts))}
    _, coco = Bleu(4).compute_score(refs, dict(enumerate([t] for t in texts)), verbose=0)
    assert ours == pytest.approx(coco[n - 1], rel=1e-9, abs=1e-300)
    smoothed = bq.bleu(" ".join(reference), pool, np.arange(len(texts)), n, "add_one")
    theirs = [
        sentence_bleu(
            [reference], h, weights=(1 / n,) * n, smoothing_function=SmoothingFunction().method2
        )
        for h in hypotheses
    ]
    assert smoothed == pytest.approx(theirs, abs=1e-12)


def test_the_bleu_rankers_are_registered_with_their_order():
    assert {"bq_bleu1", "bq_bleu2", "bq_bleu3", "bq_bleu"} <= set(bq.BQ_RANKERS.list())
    assert [bq.ranker_name(r) for r in ("bq_bleu1", "bq_bleu3", "bq_bleu")] == [
        "bleu1",
        "bleu3",
        "bleu",
    ]
    with pytest.raises(ValueError, match="BLEU order must be 1..4"):
        bq.bleu(
            "a b",
            bq.Candidates(["a"], np.array(["a"], dtype=object), np.zeros((1, 2))),
            np.array([0]),
            5,
        )


def test_every_ranking_names_its_method_and_lasso_its_mode():
    """The fast and the paper mode of LASSO (and BLEU's smoothing) are named in the
    rankings, the exported datasets and the R_score tables (docs/text.md)."""
    fast = bq.describe_ranker("bq_lasso", bq.DEFAULT_RANKING, "all-MiniLM-L6-v2")
    assert fast == (
        "LASSO, fast mode: non-negative, alpha 0.001, the 300 cosine-nearest "
        "candidates on all-MiniLM-L6-v2 embeddings"
    )
    paper = bq.RankSettings(lasso_mode="paper", lasso_lambda=1e-6, exclude_main="run")
    assert bq.describe_ranker("ynbq_lasso", paper) == (
        "LASSO, paper mode: unconstrained, lambda 1e-06, the whole pool (LARS); yes/no pool; "
        "every main question removed from the pool"
    )
    assert bq.describe_ranker("bq_bleu") == "BLEU-4, coco-caption, no smoothing"
    assert bq.describe_ranker("bq_bleu2", bq.RankSettings(bleu_smoothing="add_one")) == (
        "BLEU-2, add-one smoothing (nltk method2)"
    )
    vectors = _hand_made_pool()
    table = bq.rank_table(
        ["main?"],
        list(vectors),
        ["bq_lasso", "bq_cosine"],
        bq.RankSettings(3, alpha=1e-6),
        encode=_designed_encoder(vectors),
    )
    methods = dict(table.select("ranker", "method").unique().iter_rows())
    assert methods["bq_lasso"].startswith("LASSO, fast mode: non-negative, alpha 1e-06")
    assert methods["bq_cosine"] == "cosine similarity"

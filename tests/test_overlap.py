"""The paper's other rankers against their libraries: ROUGE-L (pycocoevalcap), CIDEr-D
(pycocoevalcap, document frequencies over the pool), METEOR (nltk), and LASSO's paper
mode against scikit-learn's Lasso run directly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust.text import overlap
from vqarobust.text import ranking as bq

POOL = [
    "What color is the shirt?",
    "Is the man wearing a hat?",
    "how many people are there",
    "What is the man holding in his hand?",
    "What colour is the jacket of the person?",
    "is it raining",
    "What color is the sky?",
    "the the the man",
    "Is the shirt red or blue?",
    "what color color is is the the shirt shirt",
    "Why?",
    "Is the dog's collar red?",
]
MQS = [
    "What color is the shirt of the man?",
    "Is the dog brown?",
    "why is the man smiling?",
    "Zebra?",
]


def _pool(texts=POOL, d: int = 4) -> bq.Candidates:
    normalized = np.array([bq.normalize_question(q) for q in texts], dtype=object)
    return bq.Candidates(list(texts), normalized, np.zeros((len(texts), d), np.float32))


@pytest.mark.parametrize("mq", MQS)
def test_rouge_l_is_coco_captions(mq):
    """pycocoevalcap's ROUGE-L (beta 1.2) on rouge-score's tokens; with beta 1 it would be
    rouge-score's F-measure, which differs wherever the two lengths do."""
    from pycocoevalcap.rouge.rouge import Rouge
    from rouge_score import rouge_scorer

    pool = _pool()
    ours, _, _ = bq.rouge_scores(mq, None, pool, np.arange(len(POOL)))
    tokens = [" ".join(overlap.rouge_tokens(c)) for c in POOL]
    reference = " ".join(overlap.rouge_tokens(mq))
    theirs = [Rouge().calc_score([c], [reference]) if c else 0.0 for c in tokens]
    assert ours == pytest.approx(theirs, abs=1e-12)
    f1 = [rouge_scorer.RougeScorer(["rougeL"]).score(mq, c)["rougeL"].fmeasure for c in POOL]
    if any(ours):  # "Zebra?" shares nothing with the pool
        assert any(abs(a - b) > 1e-3 for a, b in zip(ours, f1, strict=True))


WORDS = ["a", "b", "c", "d", "a", "e"]


@settings(max_examples=80, deadline=None)
@given(
    mq=st.lists(st.sampled_from(WORDS), min_size=0, max_size=70),
    rows=st.lists(st.lists(st.sampled_from(WORDS), max_size=12), min_size=1, max_size=6),
)
def test_bit_parallel_lcs_equals_the_dynamic_program(mq, rows):
    """Bit-parallel for MQs up to 63 tokens, the dynamic program above: both the textbook
    LCS (checked by a plain Python table)."""
    vocab = {w: i for i, w in enumerate(dict.fromkeys(WORDS))}
    ids = np.full((len(rows), max(1, max(map(len, rows)))), -1)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = [vocab[w] for w in r]
    got = overlap.lcs_lengths([vocab[w] for w in mq], ids)

    def lcs(a, b):
        t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
        for i, x in enumerate(a):
            for j, y in enumerate(b):
                t[i + 1][j + 1] = t[i][j] + 1 if x == y else max(t[i][j + 1], t[i + 1][j])
        return t[-1][-1]

    assert got.tolist() == [lcs(mq, r) for r in rows]


@pytest.mark.parametrize("mq", MQS)
def test_cider_d_is_pycocoevalcaps_with_the_pools_document_frequencies(mq):
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    pool = _pool()
    ours = bq.cider_scores(mq, None, pool, np.arange(len(POOL)))[0]
    tokens = [" ".join(bq.bleu_tokens(q)) for q in POOL]
    # Document frequencies: each pool question is one document (CIDEr-D's references).
    frequencies = CiderScorer()
    for t in tokens:
        frequencies.cook_append(None, [t])
    frequencies.compute_doc_freq()
    scorer = CiderScorer()
    for t in tokens:
        scorer.cook_append(t, [" ".join(bq.bleu_tokens(mq))])
    scorer.document_frequency = frequencies.document_frequency
    theirs = scorer.compute_cider()  # its log reference length: log(len(pool))
    assert ours == pytest.approx(theirs, abs=1e-12)
    # A subset of candidates scores as the same candidates of the whole pool.
    part = np.array([0, 3, 5])
    assert bq.cider_scores(mq, None, pool, part)[0] == pytest.approx(np.asarray(theirs)[part])


def test_meteor_is_nltks_over_wordnet(wordnet):
    # The fixture installs Debian's WordNet where it can: a mark read at collection would
    # skip this on every fresh machine.
    from nltk.translate.meteor_score import single_meteor_score

    from vqarobust.text import wordnet

    pool = _pool()
    mq = "What colour is the man's shirt?"
    ours = bq.meteor_scores(mq, None, pool, np.arange(len(POOL)))[0]
    theirs = [
        single_meteor_score(bq.bleu_tokens(mq), bq.bleu_tokens(c), wordnet=wordnet.load())
        for c in POOL
    ]
    assert ours == pytest.approx(theirs)
    # Synonyms count: "colour" matches "color" through WordNet, so the colour question
    # ranks above an unrelated one.
    table = bq.rank_table(
        [mq], pool, ["bq_meteor"], bq.RankSettings(k=3), encode=lambda s: np.zeros((len(s), 4))
    )
    assert table["basic_question"][0] in {
        "What color is the shirt?",
        "What colour is the jacket of the person?",
    }
    assert bq.needs("bq_meteor") == "wordnet" and bq.needs("ynbq_meteor") == "wordnet"


def test_lasso_paper_mode_is_sklearns_lasso_with_the_papers_lambda():
    """On a pool smaller than the embedding dimension the problem has one solution, which
    coordinate descent (Lasso) reaches too: LARS's weights are the same."""
    from sklearn.linear_model import Lasso

    rng = np.random.default_rng(3)
    d, n = 48, 30
    vectors = rng.normal(size=(n, d)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"question {i}?" for i in range(n)]
    pool = bq.Candidates(texts, np.array(texts, dtype=object), vectors)
    mq = 0.5 * vectors[4] + 0.3 * vectors[11] - 0.2 * vectors[20] + 0.05 * rng.normal(size=d)
    mq = (mq / np.linalg.norm(mq)).astype(np.float32)
    lam = 1e-3
    idx = np.arange(n)
    paper = bq.RankSettings(lasso_mode="paper", lasso_lambda=lam)
    scores, source, alpha = bq.lasso_scores("main?", mq, pool, idx, paper)
    assert alpha == pytest.approx(lam / (2 * d))
    direct = Lasso(alpha=lam / (2 * d), fit_intercept=False, max_iter=200_000, tol=1e-12)
    weights = direct.fit(vectors.T.astype(np.float64), mq.astype(np.float64)).coef_
    positive = weights > 0
    assert scores[positive] == pytest.approx(weights[positive], abs=1e-6)
    assert set(np.flatnonzero(source == "lasso")) == set(np.flatnonzero(positive))
    # The negative weight is no basic question of LASSO's: cosine ranks it after.
    assert weights[20] < 0 and source[20] == "cosine"
    table = bq.rank_table(
        ["main?"],
        pool,
        ["bq_lasso"],
        bq.RankSettings(3, lasso_mode="paper", lasso_lambda=lam),
        encode=lambda s: mq[None, :],
    )
    order = np.argsort(-np.where(positive, weights, -np.inf))[:3]
    assert table["basic_question"].to_list() == [texts[i] for i in order]
    assert table["basic_question"][:2].to_list() == ["question 4?", "question 11?"]
    with pytest.raises(ValueError, match="lasso mode must be one of fast, paper"):
        bq.lasso_scores("main?", mq, pool, idx, bq.RankSettings(lasso_mode="exact"))


def test_yes_no_rankers_rank_only_the_yes_no_pool():
    texts = [f"Is there a dog number {i}?" for i in range(5)] + [
        f"What color is car {i}?" for i in range(5)
    ]
    pool = _pool(texts)
    pool.yes_no = np.array([True] * 5 + [False] * 5)
    table = bq.rank_table(
        ["Is there a dog?"],
        pool,
        ["bq_bleu", "ynbq_bleu"],
        bq.RankSettings(3),
        encode=lambda s: np.zeros((len(s), 4)),
    )
    yes_no = table.filter(ranker="ynbq_bleu")["basic_question"].to_list()
    assert len(yes_no) == 3 and all(q.startswith("Is there") for q in yes_no)
    assert bq.bq_dataset("ynbq_bleu") == "yes_no" and bq.bq_dataset("bq_bleu") == "general"
    assert bq.perturbation_name("bq_lasso", "yes_no") == "ynbq_lasso"
    assert bq.ranker_family("ynbq_lasso") == "yn_lasso" and bq.ranker_family("bq_lasso") == "lasso"
    with pytest.raises(ValueError, match="yes/no pool has 2 candidates"):
        bq.rank_table(
            ["Is there a dog?"],
            pool.subset(np.arange(10) >= 3),
            ["ynbq_bleu"],
            bq.RankSettings(3),
            encode=lambda s: np.zeros((len(s), 4)),
        )
    unknown = _pool(texts)
    with pytest.raises(ValueError, match="needs to know which pool questions are yes/no"):
        bq.rank_table(
            ["Is there a dog?"],
            unknown,
            ["ynbq_bleu"],
            bq.RankSettings(3),
            encode=lambda s: np.zeros((len(s), 4)),
        )

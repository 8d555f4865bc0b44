import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust.metrics import (
    exact_match,
    normalize_answer,
    process_punctuation,
    score_predictions,
    vqa_accuracy,
    vqa_accuracy_both,
)
from vqarobust.metrics.vqa_accuracy import vqa_accuracy_plain


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("yes\n", "yes"),  # newline -> space, stripped
        ("red\tcar", "red car"),  # tab -> space
        ("hot-dog", "hot dog"),  # punctuation not next to a space -> space
        ("yes !", "yes"),  # punctuation next to a space -> removed
        ("1,000", "1000"),  # digit-comma-digit: punctuation removed
        ("x,y 1,5", "xy 15"),  # a digit-comma-digit group anywhere removes every comma
        ("dog.", "dog"),  # period not followed by a digit -> removed
        ("3.5", "3.5"),  # period followed by a digit stays
        ("Two", "2"),  # lowercase, number word -> digit
        ("ten dogs", "10 dogs"),
        ("none", "0"),  # the official map also turns "none" into 0
        ("The Cat", "cat"),  # articles dropped
        ("an apple a day", "apple day"),
        ("dont", "don't"),  # contraction restored
        ("isnt it", "isn't it"),
        ("(tree)", "tree"),
    ],
)
def test_each_normalization_rule(raw, expected):
    assert normalize_answer(raw) == expected


def test_vqa_accuracy_both_hand_computed():
    # 3 of 10 match: 3 subsets keep 2 matches (2/3), 7 keep 3 (1) -> (2 + 7) / 10.
    assert vqa_accuracy_both("2", ["two"] * 3 + ["three"] * 7) == pytest.approx(0.9)
    # 2 of 10: (2 * 1/3 + 8 * 2/3) / 10 = 0.6
    assert vqa_accuracy_both("yes", ["yes", "Yes."] + ["no"] * 8) == pytest.approx(0.6)
    # 1 of 10: (1 * 0 + 9 * 1/3) / 10 = 0.3
    assert vqa_accuracy_both("cat", ["cat"] + ["dog"] * 9) == pytest.approx(0.3)
    assert vqa_accuracy_both("cat", ["cat"] * 4 + ["dog"] * 6) == pytest.approx(1.0)
    assert vqa_accuracy_both("cat", ["dog"] * 10) == 0.0
    # Fewer than ten answers: same rule over the answers given (3 answers, 2 match).
    assert vqa_accuracy_both("cat", ["cat", "cat", "dog"]) == pytest.approx((2 / 3 + 2 / 3) / 3)
    assert vqa_accuracy_both("cat", []) == 0.0


# vqaEval.py edge cases, expected values worked out by hand from its rules: prediction
# fully normalized; human answers verbatim when all ten agree, punctuation step only
# when they disagree; leave-one-out mean of min(matches / 3, 1).
OFFICIAL_CASES = [
    # all ten agree on "two": kept verbatim, while the prediction becomes "2"
    ("two", ["two"] * 10, 0.0, 1.0),
    ("2", ["two"] * 10, 0.0, 1.0),
    # disagreeing "2"/"two": punctuation only, so "two" never becomes "2"
    ("two", ["2"] * 5 + ["two"] * 5, 1.0, 1.0),
    ("two", ["2"] * 2 + ["two"] * 8, 0.6, 1.0),  # (2 * 1/3 + 8 * 2/3) / 10
    # "2 " keeps its trailing space (human answers are never stripped): 1 match, not 3
    ("2", ["2", "2 ", "two"] + ["3"] * 7, 0.3, 0.9),
    # disagreeing "yes."/"yes": the period goes, all ten match
    ("Yes", ["yes."] * 3 + ["yes"] * 7, 1.0, 1.0),
    # all ten agree on "yes.": compared verbatim, the prediction lost its period
    ("yes.", ["yes."] * 10, 0.0, 1.0),
    # all ten agree on "Yes": no lowercasing on the human side
    ("yes", ["Yes"] * 10, 0.0, 1.0),
    # articles are dropped from the prediction only: "the dog" -> "dog" matches 2
    ("the dog", ["the dog"] * 8 + ["dog"] * 2, 0.6, 1.0),
    # a digit-comma-digit group removes all punctuation: "1,000" -> "1000"
    ("1000", ["1,000"] * 3 + ["1000"] * 7, 1.0, 1.0),
    # a hyphen not next to a space becomes a space on both sides when they disagree
    ("hot dog", ["hot-dog"] * 4 + ["hot dog"] * 6, 1.0, 1.0),
    ("hot-dog", ["hot-dog"] * 10, 0.0, 1.0),
    # newline and tab in the prediction become spaces, then it is stripped
    ("yes\n", ["yes"] * 10, 1.0, 1.0),
    # the period step removes at most 32 periods (re.UNICODE passed as count)
    ("." * 40, ["." * 8] * 10, 1.0, 0.0),
]


@pytest.mark.parametrize(("prediction", "answers", "official", "both"), OFFICIAL_CASES)
def test_official_edge_cases(prediction, answers, official, both):
    assert vqa_accuracy(prediction, answers) == pytest.approx(official)
    assert vqa_accuracy(prediction, answers, normalization="official") == pytest.approx(official)
    assert vqa_accuracy_both(prediction, answers) == pytest.approx(both)
    q = pl.DataFrame({"question_id": [7], "answers": [answers]})
    p = pl.DataFrame({"question_id": [7], "answer": [prediction]})
    assert score_predictions(p, q)["score"].item() == pytest.approx(official)
    both_scores = score_predictions(p, q, "vqa_accuracy_both")["score"]
    assert both_scores.item() == pytest.approx(both)


def official_loop(prediction: str, answers: list[str]) -> float:
    """vqaEval.py's loop restated: answer dicts with ids, one left out per round by
    dict inequality, matches counted among the other nine."""
    pred = normalize_answer(prediction)
    gts = [{"answer": a, "answer_id": i} for i, a in enumerate(answers, 1)]
    if len({g["answer"] for g in gts}) > 1:
        for g in gts:
            g["answer"] = process_punctuation(g["answer"])
    accs = []
    for left_out in gts:
        others = [g for g in gts if g != left_out]
        accs.append(min(1.0, sum(g["answer"] == pred for g in others) / 3))
    return sum(accs) / len(accs)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["2", "two", "yes", "Yes.", "the dog", "hot-dog", "1,000"]),
    st.lists(
        st.sampled_from(
            [
                "2",
                "two",
                "2 ",
                "yes",
                "yes.",
                "Yes",
                "dog",
                "the dog",
                "hot-dog",
                "hot dog",
                "1,000",
                "1000",
            ]
        ),
        min_size=10,
        max_size=10,
    ),
)
def test_closed_form_equals_the_official_loop(prediction, answers):
    assert vqa_accuracy(prediction, answers) == pytest.approx(official_loop(prediction, answers))


def test_exact_match_uses_the_most_common_answer():
    assert exact_match("no", ["yes"] * 4 + ["no"] * 6) == 1.0
    assert exact_match("yes", ["yes"] * 4 + ["no"] * 6) == 0.0
    # Ties go to the alphabetically first normalized answer.
    assert exact_match("blue", ["red", "blue"]) == 1.0
    assert exact_match("x", []) == 0.0


def test_vectorized_scores_and_keeps_order():
    q = pl.DataFrame(
        {"question_id": [1, 2], "answers": [["two"] * 3 + ["three"] * 7, ["yes"] * 10]}
    )
    p = pl.DataFrame(
        {"question_id": [2, 1, 1, 2], "answer": ["Yes", "2", "three", None], "model": list("abcd")}
    )
    out = score_predictions(p, q, "vqa_accuracy_both")
    assert out.columns == ["question_id", "answer", "model", "score"]
    assert out["model"].to_list() == list("abcd")
    assert out["score"].to_list() == pytest.approx([1.0, 0.9, 1.0, 0.0])
    # Official: the disagreeing "two"/"three" stay words while the predictions "2" and
    # "three" (-> "3") are digits, so neither matches.
    official = score_predictions(p, q)["score"].to_list()
    assert official == pytest.approx([1.0, 0.0, 0.0, 0.0])
    em = score_predictions(p, q, "exact_match")["score"].to_list()
    assert em == [1.0, 0.0, 1.0, 0.0]


def test_vectorized_rejects_unknown_questions_and_metrics():
    q = pl.DataFrame({"question_id": [1], "answers": [["a"]]})
    with pytest.raises(ValueError, match="unknown question ids"):
        score_predictions(pl.DataFrame({"question_id": [9], "answer": ["a"]}), q)
    with pytest.raises(ValueError, match="unknown metric"):
        score_predictions(pl.DataFrame({"question_id": [1], "answer": ["a"]}), q, "bleu")


WORDS = st.sampled_from(["yes", "no", "2", "two", "the dog", "dog.", "red", "Red!", "1,000"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(WORDS, st.lists(WORDS, min_size=1, max_size=10)), min_size=1, max_size=8))
def test_vectorized_equals_scalar(cases):
    q = pl.DataFrame(
        {"question_id": list(range(len(cases))), "answers": [a for _, a in cases]},
        schema={"question_id": pl.Int64, "answers": pl.List(pl.String)},
    )
    p = pl.DataFrame({"question_id": list(range(len(cases))), "answer": [x for x, _ in cases]})
    for metric, fn in (
        ("vqa_accuracy", vqa_accuracy),
        ("vqa_accuracy_both", vqa_accuracy_both),
        ("vqa_accuracy_plain", vqa_accuracy_plain),
        ("exact_match", exact_match),
    ):
        got = score_predictions(p, q, metric)["score"].to_list()
        assert got == pytest.approx([fn(x, a) for x, a in cases])


# The visual benchmark's Eq. 2 as printed, min(#matches / 3, 1) over all ten answers,
# against the official leave-one-out mean (worked by hand above): (prediction, answers,
# Eq. 2, official).
PLAIN_CASES = [
    ("yes", ["yes"] * 2 + ["no"] * 8, 2 / 3, 0.6),
    ("yes", ["yes"] * 3 + ["no"] * 7, 1.0, 0.9),
    ("cat", ["cat"] + ["dog"] * 9, 1 / 3, 0.3),
    ("cat", ["cat"] * 4 + ["dog"] * 6, 1.0, 1.0),
    ("cat", ["dog"] * 10, 0.0, 0.0),
    # official normalization: the disagreeing "2" and "two" stay apart, "Two" -> "2"
    ("Two", ["2"] * 2 + ["two"] * 8, 2 / 3, 0.6),
    ("cat", [], 0.0, 0.0),
]


@pytest.mark.parametrize(("prediction", "answers", "plain", "official"), PLAIN_CASES)
def test_plain_eq2_against_the_official_score(prediction, answers, plain, official):
    assert vqa_accuracy_plain(prediction, answers) == pytest.approx(plain)
    assert vqa_accuracy(prediction, answers) == pytest.approx(official)
    q = pl.DataFrame(
        {"question_id": [3], "answers": [answers]},
        schema={"question_id": pl.Int64, "answers": pl.List(pl.String)},
    )
    p = pl.DataFrame({"question_id": [3], "answer": [prediction]})
    assert score_predictions(p, q, "vqa_accuracy_plain")["score"].item() == pytest.approx(plain)
    assert score_predictions(p, q)["score"].item() == pytest.approx(official)


def test_plain_eq2_is_a_valid_scoring_metric():
    import yaml

    from tests.conftest import REPO
    from vqarobust.config import validate_config

    with open(REPO / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    config.setdefault("scoring", {})["metric"] = "vqa_accuracy_plain"
    assert validate_config(config)["scoring"]["metric"] == "vqa_accuracy_plain"

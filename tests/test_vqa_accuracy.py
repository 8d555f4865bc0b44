import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust.metrics import exact_match, normalize_answer, score_predictions, vqa_accuracy


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


def test_vqa_accuracy_hand_computed():
    # 3 of 10 match: 3 subsets keep 2 matches (2/3), 7 keep 3 (1) -> (2 + 7) / 10.
    assert vqa_accuracy("2", ["two"] * 3 + ["three"] * 7) == pytest.approx(0.9)
    # 2 of 10: (2 * 1/3 + 8 * 2/3) / 10 = 0.6
    assert vqa_accuracy("yes", ["yes", "Yes."] + ["no"] * 8) == pytest.approx(0.6)
    # 1 of 10: (1 * 0 + 9 * 1/3) / 10 = 0.3
    assert vqa_accuracy("cat", ["cat"] + ["dog"] * 9) == pytest.approx(0.3)
    assert vqa_accuracy("cat", ["cat"] * 4 + ["dog"] * 6) == pytest.approx(1.0)
    assert vqa_accuracy("cat", ["dog"] * 10) == 0.0
    # Fewer than ten answers: same rule over the answers given (3 answers, 2 match).
    assert vqa_accuracy("cat", ["cat", "cat", "dog"]) == pytest.approx((2 * 1 / 3 + 2 / 3) / 3)
    assert vqa_accuracy("cat", []) == 0.0


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
    out = score_predictions(p, q)
    assert out.columns == ["question_id", "answer", "model", "score"]
    assert out["model"].to_list() == list("abcd")
    assert out["score"].to_list() == pytest.approx([1.0, 0.9, 1.0, 0.0])
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
    for metric, fn in (("vqa_accuracy", vqa_accuracy), ("exact_match", exact_match)):
        got = score_predictions(p, q, metric)["score"].to_list()
        assert got == pytest.approx([fn(x, a) for x, a in cases])

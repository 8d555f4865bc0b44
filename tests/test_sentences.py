"""Each sentence the summary and the report generate, beside the section that shows its
tables (vqarobust.report.sections), recomputed from the table rows it is made of."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from vqarobust.report.sections.context import context_sentences
from vqarobust.report.sections.figures import weakest_types_sentence
from vqarobust.report.sections.summary import reliance_sentence
from vqarobust.report.sections.uncertainty import comparison_sentences

NUMBER = r"(-?[0-9.]+)"


def _comparisons(rows: list[tuple[str, str, float, float, float]]) -> pl.DataFrame:
    """model_comparisons rows: (model_a, model_b, difference a - b, low, high), one family;
    the adjusted p-value 0.01 where the interval excludes zero, else 0.5."""
    frame = pl.DataFrame(
        rows, schema=["model_a", "model_b", "difference", "low", "high"], orient="row"
    )
    apart = (pl.col("low") > 0) | (pl.col("high") < 0)
    return frame.with_columns(
        p_adjusted=pl.when(apart).then(0.01).otherwise(0.5),
        adjust=pl.lit("holm"),
        family_size=pl.lit(len(rows)),
        distinguishable=apart,
    )


def test_comparison_sentences_by_hand():
    models = pl.DataFrame({"model": ["a", "b", "c"], "vre": [0.2, 0.5, 0.45]})
    rows = [
        ("a", "b", -0.3, -0.4, -0.2),
        ("b", "c", 0.05, -0.01, 0.1),
        ("a", "c", -0.25, -0.3, -0.1),
    ]
    family = "over the 3 pairwise comparisons of image-side VRE"
    assert comparison_sentences(models, _comparisons(rows), 0.9) == [
        "a is more robust than b (VRE 0.200 vs 0.500, difference -0.300 [-0.400, -0.200]; "
        f"Holm-adjusted p = 0.010 {family}).",
        "a is more robust than c (VRE 0.200 vs 0.450, difference -0.250 [-0.300, -0.100]; "
        f"Holm-adjusted p = 0.010 {family}).",
        "b and c are indistinguishable at 90% (VRE difference 0.050 [-0.010, 0.100]; "
        f"Holm-adjusted p = 0.500 {family}).",
    ]
    # b - a = +0.3 > 0: a is the more robust; the difference is turned to better - worse.
    flipped = _comparisons([("b", "a", 0.3, 0.2, 0.4)])
    assert comparison_sentences(models, flipped, 0.95) == [
        "a is more robust than b (VRE 0.200 vs 0.500, difference -0.300 [-0.400, -0.200]; "
        "Holm-adjusted p = 0.010 over the 1 pairwise comparison of image-side VRE)."
    ]
    assert comparison_sentences(models.head(1), None, 0.95) == []
    assert comparison_sentences(models, None, 0.95)[0].startswith("No interval was computed")


def test_context_sentences_by_hand():
    rows = [("a", "b", 0.12, 0.05, 0.2), ("a", "c", -0.02, -0.06, 0.01)]
    family = "over the 2 pairwise comparisons of context reliance"
    assert context_sentences(_comparisons(rows), 0.95) == [
        "b relies less on context than a (difference in reliance -0.120 [-0.200, -0.050]; "
        f"Holm-adjusted p = 0.010 {family}).",
        "a and c rely on context indistinguishably at 95% (difference -0.020 [-0.060, 0.010]; "
        f"Holm-adjusted p = 0.500 {family}).",
    ]
    assert context_sentences(None, 0.95) == [] == context_sentences(_comparisons([]), 0.95)


rounded = st.floats(-1, 1, allow_nan=False).map(lambda v: round(v, 3))


@given(st.lists(st.tuples(rounded, rounded, rounded), min_size=1, max_size=6))
def test_context_sentences_recompute_from_their_rows(triples):
    """Whichever model a sentence says relies less has the lower reliance by the row
    (difference a - b), the printed difference is less - more and lies in its printed
    interval, and the pair is called apart exactly when the interval excludes zero."""
    rows = [
        (f"m{i}", f"n{i}", d, min(lo, hi, d), max(lo, hi, d))
        for i, (d, lo, hi) in enumerate(triples)
    ]
    for row, sentence in zip(rows, context_sentences(_comparisons(rows), 0.95), strict=True):
        a, b, d, lo, hi = row
        pattern = (
            rf"(\w+) relies less on context than (\w+) \(difference in reliance "
            rf"{NUMBER} \[{NUMBER}, {NUMBER}\]; Holm-adjusted p = 0.010 over the "
            rf"{len(rows)} pairwise comparisons? of context reliance\)\."
        )
        apart = re.fullmatch(pattern, sentence)
        if lo > 0 or hi < 0:
            assert apart, sentence
            less, more, printed, p_lo, p_hi = apart.groups()
            sign = 1 if less == a else -1
            assert {less, more} == {a, b} and sign * d < 0
            assert float(printed) == abs(round(d, 3)) * -1 or float(printed) == 0
            assert float(p_lo) <= float(printed) <= float(p_hi) <= 0.0005
        else:
            assert not apart and "indistinguishably" in sentence
            assert f"{a} and {b}" in sentence


def test_reliance_sentence_by_hand():
    def frame(rows: list[tuple]) -> pl.DataFrame:
        return pl.DataFrame(
            rows,
            schema=["model", "ratio", "ratio_low", "ratio_high", "uses_image_little"],
            orient="row",
        )

    assert reliance_sentence(None, 0.8) is None
    assert reliance_sentence(frame([]), 0.8) is None
    assert reliance_sentence(frame([("a", 0.5, 0.4, 0.6, False)]), 0.8) == (
        "Every model loses more than 20% of its clean accuracy without the image (blank control)."
    )
    one = frame([("a", 0.5, 0.4, 0.6, False), ("b", 0.9, 0.85, 0.95, True)])
    assert reliance_sentence(one, 0.8) == (
        "Image reliance: b keeps 90% [85%, 95%] of its clean accuracy without the image "
        "(blank control; threshold 80%), so its low VRE means little use of the image, not "
        "robustness."
    )
    two = frame([("a", 0.82, None, None, True), ("b", 0.9, 0.85, 0.95, True)])
    assert reliance_sentence(two, 0.8).startswith(
        "Image reliance: a keeps 82%, b keeps 90% [85%, 95%] of their clean accuracy"
    )


def test_weakest_types_sentence_by_hand():
    weakest = pl.DataFrame(
        {
            "perturbation": ["fog", "snow"],
            "question_type": ["how many", "what"],
            "accuracy": [0.25, 0.5004],
        }
    )
    assert weakest_types_sentence(weakest, 20) == (
        "Weakest question type per corruption (mean accuracy over the models, severities "
        "1-5, point estimates; types with 20 questions or more): fog: how many (0.250); "
        "snow: what (0.500)."
    )
    assert weakest_types_sentence(None, 20) is None
    assert weakest_types_sentence(weakest.head(0), 20) is None

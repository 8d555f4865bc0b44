import math
import warnings

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vqarobust.metrics import RobustnessWarning, mmi_table, r_score, rscore_tables

ACC = pl.DataFrame(
    [("m", "clean", 0, 0.8)]
    + [("m", "snow", s, 0.8 - 0.1 * s) for s in range(1, 6)]
    + [("m", "blur", s, 0.6) for s in range(1, 6)],
    schema=["model", "perturbation", "severity", "accuracy"],
    orient="row",
)


def test_mmi_hand_computed():
    t = mmi_table(ACC, {"snow": "weather", "blur": "blur"})
    get = {(r["scope"], r["group"]): r["mmi"] for r in t.iter_rows(named=True)}
    # snow: mean(0.7, 0.6, 0.5, 0.4, 0.3) = 0.5 -> (0.8 - 0.5) / 0.8
    assert get[("perturbation", "snow")] == pytest.approx(0.375)
    assert get[("perturbation", "blur")] == pytest.approx(0.25)
    assert get[("family", "weather")] == pytest.approx(0.375)
    # all ("ave"): mean of the per-corruption means 0.5 and 0.6 = 0.55
    assert get[("all", "all")] == pytest.approx((0.8 - 0.55) / 0.8)
    # all_sets: mean over the ten perturbed sets, also 0.55 with five levels each
    assert get[("all_sets", "all_sets")] == pytest.approx((0.8 - 0.55) / 0.8)


def test_mmi_ave_weighs_each_perturbation_the_same():
    # snow at five severities (mean 0.5), one-level paraphrase at 0.2.
    acc = pl.concat(
        [
            ACC.filter(pl.col("perturbation") != "blur"),
            pl.DataFrame([("m", "paraphrase", 1, 0.2)], schema=ACC.schema, orient="row"),
        ]
    )
    t = mmi_table(acc, {"snow": "weather", "paraphrase": "sentence"})
    get = {(r["scope"], r["group"]): r for r in t.iter_rows(named=True)}
    # ave: (0.5 + 0.2) / 2 = 0.35 -> (0.8 - 0.35) / 0.8 = 0.5625
    assert get[("all", "all")]["perturbed"] == pytest.approx(0.35)
    assert get[("all", "all")]["mmi"] == pytest.approx(0.5625)
    # = the mean of the per-perturbation MMIs (0.375 and 0.75)
    assert get[("all", "all")]["mmi"] == pytest.approx((0.375 + 0.75) / 2)
    # all_sets: (0.7 + 0.6 + 0.5 + 0.4 + 0.3 + 0.2) / 6 = 0.45 -> 0.4375
    assert get[("all_sets", "all_sets")]["perturbed"] == pytest.approx(0.45)
    assert get[("all_sets", "all_sets")]["mmi"] == pytest.approx(0.4375)


def test_mmi_zero_clean_is_defined():
    acc = pl.DataFrame(
        [("m", "clean", 0, 0.0), ("m", "snow", 1, 0.0)],
        schema=["model", "perturbation", "severity", "accuracy"],
        orient="row",
    )
    with pytest.warns(RobustnessWarning, match="clean score 0"):
        t = mmi_table(acc)
    assert (t["mmi"] == 0).all()


def test_r_score_hand_computed_and_bounds():
    assert r_score(0.80, 0.80) == 1.0  # within tolerance
    assert r_score(0.80, 0.5995) == 0.0  # 20.05 points >= m
    # a 5-point drop: (sqrt 20 - sqrt 5) / (sqrt 20 - sqrt 0.05)
    expected = (math.sqrt(20) - math.sqrt(5)) / (math.sqrt(20) - math.sqrt(0.05))
    assert r_score(0.80, 0.75) == pytest.approx(expected)
    assert r_score(0.75, 0.80) == pytest.approx(expected)  # |difference|
    assert r_score(0.8, 0.75, tolerance=10, maximum=50) == 1.0
    with pytest.raises(ValueError, match="0 <= t < m <= 100"):
        r_score(0.8, 0.7, tolerance=20, maximum=20)


def test_rscore_table_matches_scalar_and_records_parameters():
    t, _ = rscore_tables(ACC, tolerance=0.1, maximum=30)
    assert set(t["tolerance"]) == {0.1} and set(t["maximum"]) == {30.0}
    for row in t.iter_rows(named=True):
        assert row["rscore"] == pytest.approx(r_score(0.8, row["acc_noisy"], 0.1, 30))
    overall = t.filter((pl.col("perturbation") == "all") & (pl.col("severity") == 1))
    assert overall["acc_noisy"][0] == pytest.approx((0.7 + 0.6) / 2)


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 50), st.floats(0.1, 50))
def test_r_score_in_unit_interval_and_monotone(a, b, t, gap):
    m = min(t + gap, 100)
    if not t < m:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = r_score(a, b, t, m)
    assert 0 <= r <= 1
    assert r_score(a, a, t, m) == 1.0
    # A larger drop never scores higher.
    assert r_score(a, a - abs(a - b) / 2, t, m) >= r - 1e-12


def _long(rows):
    return pl.DataFrame(
        rows, schema=["model", "modality", "perturbation", "severity", "accuracy"], orient="row"
    )


# Clean 0.8; image: snow 0.6 at every severity; text: typo 0.7 at every severity;
# basic questions: levels 1..7 at 0.8, 0.78, ..., 0.68.
MODAL = _long(
    [("m", "clean", "clean", 0, 0.8)]
    + [("m", "image", "snow", s, 0.6) for s in range(1, 6)]
    + [("m", "text", "typo", s, 0.7) for s in range(1, 6)]
    + [("m", "basic_question", "bq_lasso", s, 0.8 - 0.02 * (s - 1)) for s in range(1, 8)]
)


def test_mmi_image_vs_text_hand_computed():
    from vqarobust.metrics.modalities import modality_tables

    t = modality_tables(MODAL)["mmi"]
    across = {r["group"]: r["mmi"] for r in t.filter(scope="modality").iter_rows(named=True)}
    assert across["image"] == pytest.approx((0.8 - 0.6) / 0.8)  # 0.25
    assert across["text"] == pytest.approx((0.8 - 0.7) / 0.8)  # 0.125
    # image and text together: mean of the two perturbations' means = 0.65.
    assert across["all"] == pytest.approx((0.8 - 0.65) / 0.8)
    # levels: mean(0.8, 0.78, ..., 0.68) = 0.74
    assert across["basic_question"] == pytest.approx((0.8 - 0.74) / 0.8)
    per = t.filter((pl.col("scope") == "perturbation") & (pl.col("modality") == "text"))
    assert per["group"].to_list() == ["typo"] and per["mmi"][0] == pytest.approx(0.125)


def test_rscore_per_basic_question_level_and_vre_per_modality():
    from vqarobust.metrics.modalities import modality_tables

    tables = modality_tables(MODAL, rscore_tolerance=0.05, rscore_maximum=20)
    bq = (
        tables["rscore"]
        .filter((pl.col("modality") == "basic_question") & (pl.col("perturbation") == "bq_lasso"))
        .sort("severity")
    )
    assert bq["severity"].to_list() == list(range(1, 8))
    assert bq["rscore"][0] == 1.0  # no drop: within tolerance
    for row in bq.iter_rows(named=True):
        assert row["rscore"] == pytest.approx(r_score(0.8, row["acc_noisy"], 0.05, 20))
    # Basic questions have 7 levels: R_score and MMI only, no VRE.
    assert set(tables["vre_model"]["modality"]) == {"image", "text"}
    assert set(tables["submetrics"]["perturbation"]) == {"snow", "typo"}


def test_r_score_boundaries_in_percentage_points():
    # t = 0.05 points: a 0.0004 drop (0.04 points) is within tolerance.
    assert r_score(0.5, 0.4996) == 1.0
    assert r_score(0.5, 0.4995) == pytest.approx(1.0)
    # m = 20 points: exactly 20 points down scores 0, 19 points scores above 0.
    assert r_score(0.9, 0.7) == pytest.approx(0.0, abs=1e-12)
    assert r_score(0.9, 0.71) > 0
    assert r_score(1.0, 0.0) == 0.0

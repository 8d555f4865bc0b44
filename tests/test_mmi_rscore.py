import math
import warnings

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vqarobust.metrics import RobustnessWarning, mmi_table, r_score, rscore_table

ACC = pl.DataFrame(
    [("m", "clean", 0, 0.8)]
    + [("m", "snow", s, 0.8 - 0.1 * s) for s in range(1, 6)]
    + [("m", "blur", s, 0.6) for s in range(1, 6)],
    schema=["model", "corruption", "severity", "accuracy"],
    orient="row",
)


def test_mmi_hand_computed():
    t = mmi_table(ACC, {"snow": "weather", "blur": "blur"})
    get = {(r["scope"], r["group"]): r["mmi"] for r in t.iter_rows(named=True)}
    # snow: mean(0.7, 0.6, 0.5, 0.4, 0.3) = 0.5 -> (0.8 - 0.5) / 0.8
    assert get[("corruption", "snow")] == pytest.approx(0.375)
    assert get[("corruption", "blur")] == pytest.approx(0.25)
    assert get[("family", "weather")] == pytest.approx(0.375)
    # all: mean over the ten perturbed sets = 0.55
    assert get[("all", "all")] == pytest.approx((0.8 - 0.55) / 0.8)


def test_mmi_zero_clean_is_defined():
    acc = pl.DataFrame(
        [("m", "clean", 0, 0.0), ("m", "snow", 1, 0.0)],
        schema=["model", "corruption", "severity", "accuracy"],
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
    t = rscore_table(ACC, tolerance=0.1, maximum=30)
    assert set(t["tolerance"]) == {0.1} and set(t["maximum"]) == {30.0}
    for row in t.iter_rows(named=True):
        assert row["rscore"] == pytest.approx(r_score(0.8, row["acc_noisy"], 0.1, 30))
    overall = t.filter((pl.col("corruption") == "all") & (pl.col("severity") == 1))
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

import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust.metrics import (
    METRIC_NAMES,
    RobustnessWarning,
    robustness_tables,
    softmax_weights,
    weight_sweep,
)
from vqarobust.metrics.robustness import cube_layout


def _table(acc: dict[tuple[str, str], list[float]], clean: dict[str, float]) -> pl.DataFrame:
    rows = [(m, "clean", 0, a) for m, a in clean.items()]
    for (m, c), values in acc.items():
        rows += [(m, c, s, a) for s, a in enumerate(values, start=1)]
    return pl.DataFrame(
        rows, schema=["model", "perturbation", "severity", "accuracy"], orient="row"
    )


def _row(df: pl.DataFrame, **keys) -> dict:
    for k, v in keys.items():
        df = df.filter(pl.col(k) == v)
    assert df.height == 1
    return df.row(0, named=True)


def test_submetrics_hand_computed():
    t = robustness_tables(
        _table(
            {("m1", "blur"): [0.75, 0.7, 0.65, 0.6, 0.55], ("m1", "noise"): [0.8] * 5},
            {"m1": 0.8},
        )
    )
    r = _row(t.submetrics, model="m1", perturbation="blur")
    # E = 0.2, 0.25, ..., 0.45
    assert r["first_drop"] == pytest.approx(0.25)  # (0.25 - 0.2) / 0.2
    assert r["range_of_error"] == pytest.approx(1.25)  # (0.45 - 0.2) / 0.2
    assert r["error_rate"] == pytest.approx(0.05)
    assert r["average_error"] == pytest.approx(0.325)
    assert r["corruption_error_diff"] == pytest.approx(0.15)  # mean of 0.05..0.25
    assert r["accuracy"] == pytest.approx(0.675)  # mean over severities 0..5
    assert r["relative_drop"] == pytest.approx((0.8 - 0.675) / 0.8)
    noise = _row(t.submetrics, model="m1", perturbation="noise")
    assert noise["first_drop"] == 0 and noise["error_rate"] == 0
    # Scaled over the matrix: blur is the max, noise the min of every metric.
    for m in METRIC_NAMES:
        assert r[f"{m}_scaled"] == pytest.approx(1.0)
    for m in ("first_drop", "range_of_error", "error_rate", "corruption_error_diff"):
        assert noise[f"{m}_scaled"] == pytest.approx(0.0)
    vm = _row(t.vre_model, model="m1")
    assert vm["accuracy"] == pytest.approx((0.675 + 0.8) / 2)
    assert vm["vre"] == pytest.approx(0.5)  # each M(v) = mean(1, 0) and weights sum to 1
    vc = _row(t.vre_perturbation, perturbation="blur")
    assert vc["vre"] == pytest.approx(1.0)


def test_relative_drop_of_corruption_both_aggregations_over_models():
    t = robustness_tables(
        _table(
            {("a", "blur"): [0.6] * 5, ("b", "blur"): [0.2] * 5},
            {"a": 0.6, "b": 0.4},
        )
    )
    # A(a,blur) = 0.6, A(b,blur) = (0.4 + 5 * 0.2) / 6
    a_b = (0.4 + 1.0) / 6
    expected = ((0.6 - 0.6) + (0.4 - a_b)) / (0.6 + 0.4)
    vc = _row(t.vre_perturbation, perturbation="blur")
    assert vc["relative_drop_eq8"] == pytest.approx(expected)
    # The paper's tables: the mean over models of each model's drop.
    assert vc["relative_drop"] == pytest.approx((0.0 + (0.4 - a_b) / 0.4) / 2)


# The paper's own A_rel(c), for all 14 corruptions and six models, is recomputed from its
# Table A.1 in tests/test_published_tables.py.


def test_clean_given_per_corruption_is_accepted():
    rows = [("m", c, 0, 0.9) for c in ("blur", "snow")]
    rows += [("m", c, s, 0.9 - 0.1 * s) for c in ("blur", "snow") for s in range(1, 6)]
    df = pl.DataFrame(rows, schema=["model", "perturbation", "severity", "accuracy"], orient="row")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobustnessWarning)
        t = robustness_tables(df)
    assert _row(t.vre_model, model="m")["clean_accuracy"] == pytest.approx(0.9)


def test_zero_clean_error_gets_a_defined_value_and_a_warning():
    table = _table(
        {("p", "blur"): [1.0, 0.9, 0.8, 0.7, 0.6], ("q", "blur"): [0.8, 0.7, 0.6, 0.5, 0.4]},
        {"p": 1.0, "q": 0.9},
    )
    with pytest.warns(RobustnessWarning, match="E0 = 0"):
        t = robustness_tables(table)
    p = _row(t.submetrics, model="p", perturbation="blur")
    q = _row(t.submetrics, model="q", perturbation="blur")
    assert p["first_drop"] == 0.0  # E1 - E0 = 0 too
    # min E = 0 with a positive range: takes the worst finite Range of Error (q's).
    assert p["range_of_error"] == pytest.approx(q["range_of_error"])
    assert all(np.isfinite(v) for v in p.values() if isinstance(v, float))


def test_single_model_single_corruption_is_constant_and_scaled_to_zero():
    with pytest.warns(RobustnessWarning, match="constant"):
        t = robustness_tables(_table({("m", "blur"): [0.5] * 5}, {"m": 0.6}))
    assert _row(t.vre_model, model="m")["vre"] == 0.0


def test_severity_not_asked_for_is_left_out_silently():
    # No model has severity 1 (a chosen list such as [2, 3, 4, 5]): no warning.
    table = _table({("m", "blur"): [0.7, 0.6, 0.5, 0.4, 0.3]}, {"m": 0.8}).filter(
        pl.col("severity") != 1
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "missing severities", RobustnessWarning)
        warnings.filterwarnings("ignore", "first_drop is constant", RobustnessWarning)
        t = robustness_tables(table)
    r = _row(t.submetrics, model="m", perturbation="blur")
    # First-Drop falls back to severity 2: (0.4 - 0.2) / 0.2
    assert r["first_drop"] == pytest.approx(1.0)
    assert r["error_rate"] == pytest.approx(0.1)


def test_severity_one_model_lacks_is_a_warned_hole():
    table = _table(
        {("m", "blur"): [0.7, 0.6, 0.5, 0.4, 0.3], ("n", "blur"): [0.7, 0.6, 0.5, 0.4, 0.3]},
        {"m": 0.8, "n": 0.8},
    ).filter(~((pl.col("model") == "n") & (pl.col("severity") == 1)))
    with pytest.warns(RobustnessWarning, match=r"1 missing severities .*n/blur/1"):
        layout = cube_layout(table)
    assert layout.models == ["m", "n"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("m", "blur", 1, 0.5)], "models without clean rows"),
        ([("m", "clean", 0, 1.5), ("m", "blur", 1, 0.5)], "accuracy in"),
        ([("m", "clean", 0, 0.5)], "no corrupted rows"),
    ],
)
def test_bad_tables_raise(rows, message):
    df = pl.DataFrame(rows, schema=["model", "perturbation", "severity", "accuracy"], orient="row")
    with pytest.raises(ValueError, match=message):
        robustness_tables(df)


def test_weights():
    w = softmax_weights()
    assert w == pytest.approx(dict.fromkeys(METRIC_NAMES, 0.2))
    w = softmax_weights({"first_drop": 2.0})
    assert sum(w.values()) == pytest.approx(1.0) and w["first_drop"] > 0.2
    with pytest.raises(ValueError, match="unknown sub-metrics"):
        softmax_weights({"speed": 1.0})
    sweep = weight_sweep()
    assert len(sweep) == 6
    assert all(sum(ws.values()) == pytest.approx(1.0) for ws in sweep.values())


@st.composite
def cubes(draw):
    n_models = draw(st.integers(1, 3))
    n_corr = draw(st.integers(1, 3))
    acc = st.floats(0.05, 1.0, allow_nan=False)
    clean = {f"m{i}": draw(acc) for i in range(n_models)}
    data = {
        (f"m{i}", f"c{j}"): [draw(acc) for _ in range(5)]
        for i in range(n_models)
        for j in range(n_corr)
    }
    return clean, data


@settings(max_examples=40, deadline=None)
@given(cubes(), st.randoms())
def test_order_does_not_matter_and_scaled_in_unit_interval(cube, rnd):
    clean, data = cube
    table = _table(data, clean)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobustnessWarning)
        a = robustness_tables(table)
        shuffled = table.sample(fraction=1.0, shuffle=True, seed=rnd.randint(0, 1000))
        b = robustness_tables(shuffled)
    for x, y in ((a.submetrics, b.submetrics), (a.vre_model, b.vre_model)):
        assert x.equals(y)
    for m in METRIC_NAMES:
        col = a.submetrics[f"{m}_scaled"]
        assert col.min() >= -1e-12 and col.max() <= 1 + 1e-12
    assert a.vre_model["vre"].is_finite().all()


@settings(max_examples=40, deadline=None)
@given(cubes(), st.floats(0.9, 1.0))
def test_a_model_that_never_degrades_has_the_minimum_vre(cube, top):
    clean, data = cube
    # Make every other model degrade monotonically from a clean accuracy below `top`.
    for key, values in data.items():
        start = min(clean[key[0]], top)
        clean[key[0]] = start
        data[key] = list(np.minimum.accumulate([start, *values])[1:])
    corruptions = sorted({c for _, c in data})
    clean["steady"] = top
    for c in corruptions:
        data[("steady", c)] = [top] * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobustnessWarning)
        t = robustness_tables(_table(data, clean))
    steady = _row(t.vre_model, model="steady")["vre"]
    assert steady <= t.vre_model["vre"].min() + 1e-12


def test_vre_per_family_hand_computed_and_averaging_to_vre():
    """Two models, three corruptions (two of family a, one of b). A family's VRE weighs
    the scaled sub-metrics of its own corruptions; weighted by their counts, the
    families' VREs average to VRE(v), and likewise their accuracies and drops."""
    acc = {
        ("m1", "c1"): [0.7, 0.6, 0.5, 0.4, 0.3],
        ("m1", "c2"): [0.8, 0.8, 0.7, 0.7, 0.6],
        ("m1", "c3"): [0.5, 0.4, 0.3, 0.3, 0.2],
        ("m2", "c1"): [0.6, 0.6, 0.5, 0.5, 0.5],
        ("m2", "c2"): [0.7, 0.6, 0.6, 0.5, 0.4],
        ("m2", "c3"): [0.6, 0.6, 0.6, 0.5, 0.5],
    }
    families = {"c1": "a", "c2": "a", "c3": "b"}
    t = robustness_tables(_table(acc, {"m1": 0.9, "m2": 0.7}), families=families)
    vf = t.vre_family
    assert vf.select("model", "family", "n_perturbations").rows() == [
        ("m1", "a", 2),
        ("m1", "b", 1),
        ("m2", "a", 2),
        ("m2", "b", 1),
    ]
    sub = t.submetrics
    w = softmax_weights()
    for model in ("m1", "m2"):
        for family, members in (("a", ["c1", "c2"]), ("b", ["c3"])):
            rows = sub.filter(pl.col("model") == model, pl.col("perturbation").is_in(members))
            expected = sum(w[m] * rows[f"{m}_scaled"].mean() for m in METRIC_NAMES)
            got = _row(vf, model=model, family=family)
            assert got["vre"] == pytest.approx(expected, abs=1e-12)
            assert got["accuracy"] == pytest.approx(rows["accuracy"].mean(), abs=1e-12)
            assert got["relative_drop"] == pytest.approx(rows["relative_drop"].mean(), abs=1e-12)
        mine = vf.filter(pl.col("model") == model)
        for column, table_column in (
            ("vre", "vre"),
            ("accuracy", "accuracy"),
            ("relative_drop", "relative_drop"),
        ):
            weighted = (mine[column] * mine["n_perturbations"]).sum() / 3
            assert weighted == pytest.approx(_row(t.vre_model, model=model)[table_column])
    # m1 loses most on family b (c3): its largest relative drop.
    m1 = vf.filter(pl.col("model") == "m1").sort("relative_drop")
    assert m1["family"][-1] == "b"
    assert robustness_tables(_table(acc, {"m1": 0.9, "m2": 0.7})).vre_family is None

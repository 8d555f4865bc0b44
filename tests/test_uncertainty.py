"""The paired cluster bootstrap, drop tests and effective robustness (docs/metrics.md)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, false_discovery_control

from tests.simulated_study import FAMILIES, drops
from vqarobust.metrics.intervals import uncertainty_tables
from vqarobust.metrics.modalities import modality_tables
from vqarobust.metrics.simulation import (
    SimulatedModel,
    SimulatedStudy,
    interval_coverage,
    interval_width,
    simulate_questions,
    simulate_scored,
)
from vqarobust.metrics.uncertainty import (
    Settings,
    adjust_p,
    cluster_index,
    cluster_sums,
    drop_tests,
    effective_robustness,
    rank_shares,
    replicate_weights,
    sign_test_p,
    summarize,
)


def _accuracy(scored: pl.DataFrame) -> pl.DataFrame:
    return scored.group_by("model", "modality", "perturbation", "severity").agg(
        pl.col("score").mean().alias("accuracy")
    )


def _est(intervals: pl.DataFrame, metric: str, **keys: object) -> float:
    row = intervals.filter(pl.col("metric") == metric)
    for k, v in keys.items():
        row = row.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
    assert row.height == 1, (metric, keys, row)
    return row.row(0, named=True)


def test_estimates_are_the_point_tables(simulated_run):
    _, scored, t = simulated_run
    acc = _accuracy(scored)
    point = modality_tables(
        acc.filter(pl.col("perturbation") != "blank"),
        families={k: v for k, v in FAMILIES.items() if k != "blank"},
    )
    iv = t["intervals"]
    for r in point["vre_model"].iter_rows(named=True):
        got = _est(iv, "vre_model", model=r["model"], modality=r["modality"])
        assert got["estimate"] == pytest.approx(r["vre"], abs=1e-12)
        assert got["low"] <= got["estimate"] <= got["high"]
        rel = _est(
            iv, "relative_drop_paper", model=r["model"], modality=r["modality"], perturbation=None
        )
        assert rel["estimate"] == pytest.approx(r["relative_drop"], abs=1e-12)
    for r in point["vre_perturbation"].iter_rows(named=True):
        got = _est(
            iv,
            "vre_perturbation",
            model=None,
            modality=r["modality"],
            perturbation=r["perturbation"],
        )
        assert got["estimate"] == pytest.approx(r["vre"], abs=1e-12)
    for r in point["submetrics"].iter_rows(named=True):
        for m in (
            "first_drop",
            "range_of_error",
            "error_rate",
            "average_error",
            "corruption_error_diff",
            "relative_drop",
        ):
            name = "relative_drop_paper" if m == "relative_drop" else m
            got = _est(
                iv, name, model=r["model"], modality=r["modality"], perturbation=r["perturbation"]
            )
            assert got["estimate"] == pytest.approx(r[m], abs=1e-12), m
    for r in point["mmi"].iter_rows(named=True):
        got = _est(
            iv,
            "mmi",
            model=r["model"],
            modality=r["modality"],
            key=r["scope"],
            perturbation=r["group"],
        )
        assert got["estimate"] == pytest.approx(r["mmi"], abs=1e-12)
    for r in point["rscore"].iter_rows(named=True):
        got = _est(
            iv,
            "rscore",
            model=r["model"],
            modality=r["modality"],
            perturbation=r["perturbation"],
            severity=r["severity"],
        )
        assert got["estimate"] == pytest.approx(r["rscore"], abs=1e-12)
    for r in point["rscore_overall"].iter_rows(named=True):
        got = _est(
            iv,
            "rscore_overall",
            model=r["model"],
            modality=r["modality"],
            perturbation=r["perturbation"],
        )
        assert got["estimate"] == pytest.approx(r["rscore"], abs=1e-12)
    for r in acc.iter_rows(named=True):
        got = _est(
            iv,
            "accuracy",
            model=r["model"],
            modality=r["modality"],
            perturbation=r["perturbation"],
            severity=r["severity"],
        )
        assert got["estimate"] == pytest.approx(r["accuracy"], abs=1e-12)


def test_every_metric_of_the_issue_has_intervals(simulated_run):
    _, _, t = simulated_run
    metrics = set(t["intervals"]["metric"])
    assert {
        "accuracy",
        "question_type_accuracy",
        "answer_type_accuracy",
        "relative_drop_paper",
        "first_drop",
        "range_of_error",
        "error_rate",
        "average_error",
        "corruption_error_diff",
        "vre_model",
        "vre_perturbation",
        "mmi",
        "rscore",
        "rscore_mean",
        "rscore_overall",
        "perturbed_accuracy",
        "image_reliance_ratio",
    } <= metrics
    finite = t["intervals"].filter(pl.col("low").is_not_nan(), pl.col("high").is_not_nan())
    assert finite.filter(pl.col("low") > pl.col("high")).is_empty()
    # Every pair of models, for every compared quantity; rank shares sum to 1.
    c = t["model_comparisons"]
    assert set(c["metric"]) == {"clean_accuracy", "perturbed_accuracy", "vre"}
    assert c.filter(pl.col("metric") == "vre", pl.col("modality") == "image").height == 3
    shares = t["rank_stability"].group_by("modality", "model").agg(pl.col("share").sum())
    assert np.allclose(shares["share"], 1.0)
    assert t["effective_robustness"].filter(pl.col("perturbation") == "all").height == 9


def test_resampling_is_paired_across_models():
    """Two models with identical answers differ by exactly 0 in every resample."""
    q = simulate_questions(50, 4, seed=3)
    scored = simulate_scored(q, {"a": SimulatedModel(0.7, drops(1.0))}, seed=3)
    both = pl.concat([scored, scored.with_columns(pl.lit("b").alias("model"))])
    t = uncertainty_tables(both, q, Settings(resamples=200), families=FAMILIES, controls=["blank"])
    c = t["model_comparisons"]
    assert c.height and (c["low"] == 0).all() and (c["high"] == 0).all()
    assert not c["distinguishable"].any()


def test_weights_are_seeded_and_pinned():
    w = replicate_weights(6, 3, seed=0)
    assert (w[0] == 1).all() and (w[1:].sum(axis=1) == 6).all()
    assert np.array_equal(w, replicate_weights(6, 3, seed=0))
    assert not np.array_equal(w, replicate_weights(6, 3, seed=1))
    # Golden: the resamples of a run must never drift between versions.
    assert w[1:].astype(int).tolist() == GOLDEN_WEIGHTS


GOLDEN_WEIGHTS = [[1, 1, 0, 0, 1, 3], [1, 2, 1, 0, 1, 1], [0, 0, 2, 2, 1, 1]]


def test_cluster_sums_by_hand():
    q = pl.DataFrame({"question_id": [1, 2, 3, 4], "image_id": [10, 10, 20, 30]})
    mapping, n = cluster_index(q, "image")
    assert n == 3
    rows = pl.DataFrame(
        {"model": ["m"] * 4, "question_id": [1, 2, 3, 4], "score": [1.0, 0.0, 1.0, 0.5]}
    ).join(mapping, on="question_id")
    sums = cluster_sums(rows, ["model"], ["score"], n)
    w = np.array([[1.0, 1, 1], [2, 0, 1], [0, 3, 0]])
    # (2 * (1 + 0) + 0.5) / (2 * 2 + 1) = 0.5; image 20 alone: 1.0.
    assert sums.means("score", w)[:, 0].tolist() == pytest.approx([2.5 / 4, 0.5, 1.0])
    _, nq = cluster_index(q, "question")
    assert nq == 4


def test_summarize_percentiles_by_hand():
    values = np.array([5.0, *range(1, 101)])[:, None]
    s = summarize(values, 0.9)
    assert s["estimate"][0] == 5.0
    assert s["low"][0] == pytest.approx(np.quantile(np.arange(1, 101), 0.05))
    assert s["high"][0] == pytest.approx(np.quantile(np.arange(1, 101), 0.95))
    assert s["se"][0] == pytest.approx(np.std(np.arange(1, 101), ddof=1))
    assert np.isnan(summarize(values[:1], 0.9)["low"][0])


@given(st.integers(0, 60), st.integers(0, 60))
@settings(max_examples=60, deadline=None)
def test_sign_test_is_scipys_exact_binomial(worse, better):
    expected = 1.0 if worse + better == 0 else binomtest(worse, worse + better, 0.5).pvalue
    assert sign_test_p(np.array([worse]), np.array([better]))[0] == pytest.approx(expected)


def test_adjustments_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.06 (monotone).
    assert adjust_p(p, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust_p(p, "bh") == pytest.approx(false_discovery_control(p, method="bh"))
    with pytest.raises(ValueError, match="adjust"):
        adjust_p(p, "bonferroni")


def test_drop_tests_by_hand():
    rows = []
    # 6 questions: clean correct on all; perturbed wrong on 5, right on 1 -> 5 worse, 0 better.
    for qid in range(6):
        rows.append(("m", "clean", "clean", 0, qid, 1.0))
        rows.append(("m", "image", "noise", 1, qid, 0.0 if qid < 5 else 1.0))
        rows.append(("m", "text", "typo", 1, qid, 0.3 if qid < 2 else 1.0))
    scored = pl.DataFrame(
        rows,
        orient="row",
        schema=["model", "modality", "perturbation", "severity", "question_id", "score"],
    )
    t = drop_tests(scored).sort("modality")
    image, text = t.row(0, named=True), t.row(1, named=True)
    assert (image["n_worse"], image["n_better"], image["test"]) == (5, 0, "mcnemar_exact")
    assert image["p_value"] == pytest.approx(2 * 0.5**5)
    assert image["p_adjusted"] == pytest.approx(min(1, 2 * image["p_value"]))
    assert (text["n_worse"], text["test"]) == (2, "sign")
    assert text["p_value"] == pytest.approx(0.5)
    assert image["mean_difference"] == pytest.approx(-5 / 6)


def test_effective_robustness_by_hand():
    clean = np.array([[0.5, 0.7310585786300049, 0.8807970779778823]])  # logit 0, 1, 2
    pert = 1 / (1 + np.exp(-np.array([[-1.0, 0.0, 1.0]])))  # logit = x - 1 exactly
    fit = effective_robustness(clean, pert)
    assert fit["slope"][0] == pytest.approx([1.0] * 3)
    assert fit["intercept"][0] == pytest.approx([-1.0] * 3)
    assert np.allclose(fit["residual"], 0.0, atol=1e-12) and fit["fitted"].all()
    # Lift the middle model by 0.1: out of sample its expected value comes from the line of
    # the other two, still logit = x - 1, so its residual is exactly the lift (in sample the
    # line would move towards it and take part of it). The others' lines now pass through
    # the lifted point, above them: both negative, and the residuals do not sum to zero.
    pert2 = pert.copy()
    pert2[0, 1] += 0.1
    res = effective_robustness(clean, pert2)["residual"][0]
    assert res[1] == pytest.approx(0.1, abs=1e-12)
    assert res[0] < 0 and res[2] < 0 and abs(res.sum()) > 1e-3
    # A reference set of the outer two: the middle model is measured against their line;
    # each of them would rest on one model alone, so it gets no fit.
    ref = effective_robustness(clean, pert2, np.array([True, False, True]))
    assert ref["fitted"].tolist() == [False, True, False]
    assert ref["residual"][0, 1] == pytest.approx(0.1, abs=1e-12)
    assert np.isnan(ref["residual"][0, [0, 2]]).all()


def test_effective_robustness_table_fits_out_of_sample_or_says_why(simulated_run):
    q, scored, _ = simulated_run
    t = uncertainty_tables(scored, q, Settings(resamples=20), families=FAMILIES, controls=["blank"])
    eff = t["effective_robustness"].filter(
        pl.col("perturbation") == "all", pl.col("modality") == "image"
    )
    models = sorted(eff["model"])
    for r in eff.iter_rows(named=True):
        others = [m for m in models if m != r["model"]]
        assert r["fitted_on"] == ", ".join(others) and r["note"] is None
        assert r["low"] <= r["effective_robustness"] <= r["high"]
    two = scored.filter(pl.col("model") != models[0])
    t2 = uncertainty_tables(two, q, Settings(resamples=20), families=FAMILIES, controls=["blank"])
    e2 = t2["effective_robustness"].filter(pl.col("perturbation") == "all")
    assert e2.height and e2["predicted"].is_null().all() and e2["low"].is_null().all()
    assert e2["note"].str.starts_with("no fit: the line would rest on 1 model").all()
    # A reference set: the third model measured against the line of the two named ones.
    t3 = uncertainty_tables(
        scored,
        q,
        Settings(resamples=20, effective_reference=models[:2]),
        families=FAMILIES,
        controls=["blank"],
    )
    e3 = t3["effective_robustness"].filter(
        pl.col("perturbation") == "all", pl.col("modality") == "image"
    )
    third = e3.filter(pl.col("model") == models[2]).row(0, named=True)
    assert third["fitted_on"] == ", ".join(models[:2]) and third["effective_robustness"] is not None
    assert e3.filter(pl.col("model") != models[2])["note"].is_not_null().all()
    with pytest.raises(ValueError, match="effective_reference names models the run has not"):
        uncertainty_tables(
            scored,
            q,
            Settings(resamples=0, effective_reference=("nope",)),
            families=FAMILIES,
            controls=["blank"],
        )


def test_rank_shares_by_hand():
    values = np.array([[0.1, 0.2, 0.3], [0.2, 0.1, 0.3], [0.1, 0.3, 0.2], [0.4, 0.2, 0.1]])
    shares = rank_shares(values)
    assert shares[0].tolist() == [0.5, 0.25, 0.25]
    assert shares.sum(axis=0).tolist() == [1.0, 1.0, 1.0]


def test_off_switch_and_bad_settings(simulated_run):
    q, scored, _ = simulated_run
    t = uncertainty_tables(scored, q, Settings(resamples=0), families=FAMILIES, controls=["blank"])
    assert t["intervals"].is_empty() and t["model_comparisons"].is_empty()
    assert t["drop_tests"].height and t["effective_robustness"]["low"].is_null().all()
    with pytest.raises(ValueError, match="uncertainty.cluster"):
        Settings(cluster="pixel")
    with pytest.raises(ValueError, match="unknown uncertainty settings"):
        Settings.from_mapping({"resample": 10})


def test_cluster_intervals_cover_the_truth():
    """Questions correlated within an image: the image bootstrap's 95% intervals of
    accuracy and relative drop cover the true values in 93-97% of 500 datasets."""
    acc, drop = interval_coverage(500, cluster="image", study=SimulatedStudy(concentration=4.0))
    assert 0.93 <= acc <= 0.97, acc
    assert 0.93 <= drop <= 0.97, drop


def test_image_clusters_widen_intervals_only_when_questions_are_correlated():
    correlated = interval_width("image", 2.0) / interval_width("question", 2.0)
    independent = interval_width("image", None) / interval_width("question", None)
    assert correlated > 1.4, correlated
    assert 0.9 < independent < 1.1, independent


def test_intervals_do_not_depend_on_row_order(simulated_run):
    """The resamples follow the sorted image ids, not the order rows were read in."""
    q, scored, t = simulated_run
    shuffled = scored.sample(fraction=1.0, shuffle=True, seed=11)
    again = uncertainty_tables(
        shuffled, q.reverse(), Settings(resamples=300), families=FAMILIES, controls=["blank"]
    )
    cols = ["estimate", "low", "high", "se"]
    a = t["intervals"].filter(pl.col("metric") == "vre_model")
    b = again["intervals"].filter(pl.col("metric") == "vre_model")
    assert np.allclose(a.select(cols).to_numpy(), b.select(cols).to_numpy(), rtol=0, atol=1e-12)


def test_context_intervals_estimate_the_context_tables():
    from vqarobust.metrics.context import context_tables

    rng = np.random.default_rng(4)
    q = simulate_questions(40, 3, seed=4)
    rows = []
    for model in ("m1", "m2"):
        for qid in q["question_id"]:
            clean_right = bool(rng.random() < 0.7)
            rows.append(
                (model, "clean", "clean", 0, qid, "a" if clean_right else "b", float(clean_right))
            )
            for kind in ("swap_class", "swap_attribute"):
                for sev in (1, 2):
                    flip = rng.random() < 0.3
                    right = clean_right != flip
                    rows.append(
                        (model, "context", kind, sev, qid, "a" if right else "b", float(right))
                    )
    scored = pl.DataFrame(
        rows,
        orient="row",
        schema=["model", "modality", "perturbation", "severity", "question_id", "answer", "score"],
    )
    scored = pl.concat(
        [
            scored,
            scored.filter(pl.col("modality") == "clean").with_columns(
                pl.lit("image").alias("modality"),
                pl.lit("snow").alias("perturbation"),
                pl.lit(1, dtype=pl.Int64).alias("severity"),
            ),
        ]
    )
    t = uncertainty_tables(scored, q, Settings(resamples=200), families={"snow": "weather"})
    point = context_tables(scored)
    for name in ("context_reliance", "effective_accuracy"):
        col = "reliance" if name == "context_reliance" else "effective_accuracy"
        for r in point[name].iter_rows(named=True):
            got = _est(t["intervals"], name, model=r["model"], perturbation=r["perturbation"])
            assert got["estimate"] == pytest.approx(r[col], abs=1e-12)
            assert got["low"] <= got["estimate"] <= got["high"]
    pairs = t["model_comparisons"].filter(pl.col("modality") == "context")
    assert set(pairs["metric"]) == {"context_reliance", "effective_accuracy"}
    rel = point["context_reliance"].filter(pl.col("perturbation") == "all")
    r = dict(rel.select("model", "reliance").iter_rows())
    row = pairs.filter(pl.col("metric") == "context_reliance").row(0, named=True)
    assert row["difference"] == pytest.approx(r["m1"] - r["m2"], abs=1e-12)


def test_a_model_without_clean_rows_is_an_error(simulated_run):
    q, scored, _ = simulated_run
    broken = scored.filter(~((pl.col("model") == "m1") & (pl.col("modality") == "clean")))
    with pytest.raises(ValueError, match=r"no clean predictions for models \['m1'\]"):
        uncertainty_tables(broken, q, Settings(resamples=10), families=FAMILIES, controls=["blank"])


def test_a_model_missing_one_side_gets_no_comparison_there(simulated_run):
    q, scored, _ = simulated_run
    partial = scored.filter(~((pl.col("model") == "m2") & (pl.col("modality") == "text")))
    t = uncertainty_tables(
        partial, q, Settings(resamples=50), families=FAMILIES, controls=["blank"]
    )
    c = t["model_comparisons"].filter(pl.col("metric") == "perturbed_accuracy")
    assert set(c["modality"]) == {"image", "basic_question"}
    assert t["effective_robustness"].filter(pl.col("modality") == "text").is_empty()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=300))
def test_dense_codes_are_numpys_unique(codes):
    from vqarobust.metrics.uncertainty import _dense

    code = np.asarray(codes, dtype=np.int64)
    inverse, distinct = _dense(code)
    expect_distinct, expect_inverse = np.unique(code, return_inverse=True)
    assert distinct.tolist() == expect_distinct.tolist()
    assert inverse.tolist() == expect_inverse.tolist()


def test_encoding_by_hand_and_refined_by_one_more_key():
    from vqarobust.metrics.uncertainty import encode_keys

    rows = pl.DataFrame({"model": ["b", "a", "b", "a"], "severity": [1, 0, 1, 1]})
    enc = encode_keys(rows, ["model", "severity"])
    assert enc.labels.rows() == [("a", 0), ("a", 1), ("b", 1)]
    assert enc.inverse.tolist() == [2, 0, 2, 1]
    # One more key: the type of each row, coded into the sorted names.
    names = pl.DataFrame({"kind": ["x", "y"]})
    finer = enc.refine(np.array([1, 0, 0, 0]), names)
    assert finer.labels.rows() == [("a", 0, "x"), ("a", 1, "x"), ("b", 1, "x"), ("b", 1, "y")]
    assert finer.inverse.tolist() == [3, 0, 2, 1]
    with pytest.raises(ValueError, match="row 0 of the replicate weights"):
        cluster_sums(
            rows.with_columns(pl.lit(0).alias("cluster"), pl.lit(1.0).alias("v")), enc, ["v"], 1
        ).means("v", np.array([[2.0]]))


def test_observed_weights_give_the_data_whatever_the_clusters():
    from vqarobust.metrics.uncertainty import OBSERVED

    rows = pl.DataFrame(
        {"model": "m", "question_id": [3, 1, 2], "cluster": [0, 1, 1], "score": [0.6, 0.3, 1.0]}
    )
    sums = cluster_sums(rows, ["model"], ["score"], 2)
    assert sums.means("score", OBSERVED).tolist() == [[(0.3 + 1.0 + 0.6) / 3]]
    assert sums.totals("score", OBSERVED).tolist() == [[0.3 + 1.0 + 0.6]]


def test_mean_intervals_resample_the_images_with_the_runs_settings():
    """The diagnostics' intervals (SSIM, PSNR, attention shift, colour-bias shares): the
    replicate means computed by hand from the run's own resample weights."""
    from vqarobust.metrics.uncertainty import Settings, mean_intervals, replicate_weights

    rows = pl.DataFrame(
        {
            "k": ["a", "a", "a", "b", "b"],
            "image_id": [7, 7, 9, 9, 3],
            "v": [1.0, 0.0, 0.5, 0.2, 0.4],
        }
    )
    s = Settings(resamples=200, seed=3, level=0.9)
    out = mean_intervals(rows, ["k"], ["v"], "image_id", s).sort("k")
    w = replicate_weights(3, 200, 3)  # images 3, 7, 9 in sorted order
    for key, col in (("a", {7: [1.0, 0.0], 9: [0.5]}), ("b", {9: [0.2], 3: [0.4]})):
        sums = np.array([sum(col.get(i, [])) for i in (3, 7, 9)])
        counts = np.array([len(col.get(i, [])) for i in (3, 7, 9)])
        with np.errstate(invalid="ignore"):
            means = (w[1:] @ sums) / (w[1:] @ counts)
        means = means[~np.isnan(means)]
        low, high = np.quantile(means, [0.05, 0.95])
        row = out.filter(pl.col("k") == key).row(0, named=True)
        assert row["v_low"] == pytest.approx(low) and row["v_high"] == pytest.approx(high)
        assert row["v_low"] <= rows.filter(pl.col("k") == key)["v"].mean() <= row["v_high"]
    none = mean_intervals(rows, ["k"], ["v"], "image_id", Settings(resamples=0))
    assert none["v_low"].null_count() == 2 and none["v_high"].null_count() == 2
    empty = mean_intervals(rows.clear(), ["k"], ["v"], "image_id", s)
    assert empty.columns == ["k", "v_low", "v_high"] and empty.is_empty()


def test_claims_are_holm_adjusted_within_their_family():
    """Three models whose pairwise VRE differences each have 15 of 1,000 resamples at or
    below zero: every unadjusted 95% interval excludes zero (p = 2 x 16 / 1,001 = 0.032),
    but Holm over the family of three comparisons gives 0.096, so no pair is called apart
    and the sentences say so; two of those models alone (a family of one) are."""
    from vqarobust.metrics.intervals import _pairs, adjust_comparisons
    from vqarobust.report.sections.uncertainty import comparison_sentences

    boot = np.r_[np.full(15, -0.01), np.linspace(0.05, 0.15, 985)]
    x = np.r_[0.1, boot]  # row 0: the data
    values = np.column_stack([np.zeros_like(x), x, 2 * x])  # VRE of a, b, c per replicate
    rows = _pairs("image", "vre", ["a", "b", "c"], values, 0.95)
    for row in rows:
        assert row["high"] < 0  # the unadjusted interval excludes zero
        assert row["p_value"] == pytest.approx(2 * 16 / 1001)
    table = adjust_comparisons(rows, 0.95, "holm")
    assert table["p_adjusted"].to_list() == pytest.approx([3 * 2 * 16 / 1001] * 3)
    assert table["family_size"].to_list() == [3, 3, 3] and not table["distinguishable"].any()
    models = pl.DataFrame({"model": ["a", "b", "c"], "vre": [0.0, 0.1, 0.2]})
    said = comparison_sentences(models, table, 0.95)
    assert all(
        "indistinguishable at 95%" in s and "over the 3 pairwise comparisons" in s for s in said
    )
    alone = adjust_comparisons(
        _pairs("image", "vre", ["a", "b"], values[:, :2], 0.95), 0.95, "holm"
    )
    assert alone["distinguishable"].to_list() == [True]
    assert comparison_sentences(models.head(2), alone, 0.95)[0].startswith(
        "a is more robust than b (VRE 0.000 vs 0.100, difference -0.100"
    )
    # Another family (clean accuracy) does not count towards this one.
    other = _pairs("clean", "clean_accuracy", ["a", "b"], values[:, :2], 0.95)
    mixed = adjust_comparisons([*other, *rows[:1]], 0.95, "holm")
    assert mixed["distinguishable"].to_list() == [True, True]

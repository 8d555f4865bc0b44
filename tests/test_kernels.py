"""One kernel per statistic (docs/metrics.md, "Uncertainty"): each point table is its
statistic's kernel over the observed accuracies (one replicate), and the bootstrap runs
the same kernel over every replicate, so the two agree by construction, bit for bit."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_uncertainty import FAMILIES, run  # noqa: F401  (the fixture)
from vqarobust.metrics.grouping import group_means, with_rows
from vqarobust.metrics.mmi import SCOPES, mmi_arrays, mmi_table
from vqarobust.metrics.modalities import modality_tables
from vqarobust.metrics.robustness import (
    accuracy_cube,
    robustness_tables,
    softmax_weights,
    vre_arrays,
)
from vqarobust.metrics.rscore import rscore_arrays, rscore_tables

CORRUPTIONS = ("fog", "snow", "zoom")
FAMILY = {"fog": "weather", "snow": "weather", "zoom": "blur"}


@st.composite
def accuracy_tables(draw: st.DrawFn) -> pl.DataFrame:
    """A gap-free accuracy table: 1-3 models, a clean row each, 1-3 corruptions with
    1-5 severities (the same for every model), accuracies on a 1/64 grid."""
    models = [f"m{i}" for i in range(draw(st.integers(1, 3)))]
    corruptions = CORRUPTIONS[: draw(st.integers(1, 3))]
    levels = {c: draw(st.integers(1, 5)) for c in corruptions}
    cells = [(m, "clean", 0) for m in models]
    cells += [(m, c, s) for m in models for c in corruptions for s in range(1, levels[c] + 1)]
    values = draw(st.lists(st.integers(0, 64), min_size=len(cells), max_size=len(cells)))
    rows = [(*cell, v / 64) for cell, v in zip(cells, values, strict=True)]
    return pl.DataFrame(rows, schema=["model", "corruption", "severity", "accuracy"],
                        orient="row")  # fmt: skip


def _replicates(table: pl.DataFrame, extra: np.ndarray) -> np.ndarray:
    """The observed accuracies as replicate 0, then other replicates."""
    return np.vstack([table["accuracy"].to_numpy()[None, :], extra])


@settings(max_examples=60, deadline=None)
@given(accuracy_tables(), st.integers(0, 2**32 - 1))
def test_mmi_table_is_its_kernel_at_the_observed_replicate(table, seed):
    point = mmi_table(table, FAMILY)
    rows = with_rows(table)
    other = np.random.default_rng(seed).uniform(0.05, 1, (3, table.height))
    m = mmi_arrays(_replicates(table, other), rows, FAMILY)
    for scope in SCOPES:
        labels, perturbed = m.perturbed[scope]
        mine = point.filter(pl.col("scope") == scope).sort("model", "group")
        assert mine.select("model", "group").equals(labels.select("model", "group"))
        # Bit for bit: the table is row 0 of the kernel that the bootstrap calls.
        assert mine["perturbed"].to_list() == perturbed[0].tolist()
        assert mine["mmi"].to_list() == m.mmi(scope)[0].tolist()
        # The other replicates go through the same code: each row alone gives its own.
        for r in range(1, 4):
            alone = mmi_arrays(other[r - 1][None, :], rows, FAMILY)
            assert alone.mmi(scope)[0].tolist() == m.mmi(scope)[r].tolist()
    # And the kernel is MMI: the mean over a corruption's severities, the mean of those.
    for (model,), part in table.group_by(["model"]):
        clean = part.filter(pl.col("severity") == 0)["accuracy"].mean()
        means = part.filter(pl.col("severity") > 0).group_by("corruption").agg(
            pl.col("accuracy").mean())["accuracy"]  # fmt: skip
        row = point.filter(pl.col("model") == model, pl.col("scope") == "all").row(0, named=True)
        assert np.isclose(row["perturbed"], means.mean(), rtol=0, atol=1e-12)
        expected = (clean - means.mean()) / clean if clean > 0 else 0.0
        assert np.isclose(row["mmi"], expected, rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(accuracy_tables(), st.floats(0, 5), st.floats(1, 60))
def test_rscore_tables_are_their_kernel_at_the_observed_replicate(table, tolerance, gap):
    maximum = min(tolerance + gap, 100.0)
    per_level, overall = rscore_tables(table, tolerance, maximum)
    r = rscore_arrays(table["accuracy"].to_numpy()[None, :], with_rows(table), tolerance,
                      maximum)  # fmt: skip
    order = r.labels.with_columns(pl.Series("rscore", r.rscore[0]), pl.Series("di", r.acc_di[0]))
    order = order.sort("model", "corruption", "severity")
    assert per_level["rscore"].to_list() == order["rscore"].to_list()
    assert per_level["acc_di"].to_list() == order["di"].to_list()
    lab = r.overall_labels.with_columns(pl.Series("rscore", r.overall[0])).sort(
        "model", "corruption"
    )
    assert overall["rscore"].to_list() == lab["rscore"].to_list()
    assert overall["levels"].to_list() == lab["levels"].to_list()
    # The per-perturbation score is that of the mean deterioration over its levels.
    sm, st_ = np.sqrt(maximum), np.sqrt(tolerance)
    for row in overall.iter_rows(named=True):
        di = per_level.filter(pl.col("model") == row["model"],
                              pl.col("corruption") == row["corruption"])["acc_di"]  # fmt: skip
        assert row["levels"] == di.len()
        assert np.isclose(row["acc_di"], di.mean(), rtol=0, atol=1e-9)
        expected = np.clip((sm - np.sqrt(row["acc_di"])) / (sm - st_), 0, 1)
        assert row["rscore"] == expected


@settings(max_examples=30, deadline=None)
@given(accuracy_tables())
def test_vre_tables_are_their_kernel_at_the_observed_replicate(table):
    point = robustness_tables(table)
    cube = accuracy_cube(table)
    arrays = vre_arrays(cube.acc[None], softmax_weights())
    vre = dict(point.vre_model.select("model", "vre").iter_rows())
    assert [vre[m] for m in cube.models] == arrays["vre_v"][0].tolist()


def test_group_means_by_hand():
    frame = with_rows(pl.DataFrame({"g": ["a", "a", "a", "b"], "p": ["x", "x", "y", "x"]}))
    values = np.array([[1.0, 3.0, 8.0, 5.0]])
    labels, plain = group_means(values, frame, ["g"])
    assert labels["g"].to_list() == ["a", "b"] and plain.tolist() == [[4.0, 5.0]]
    # Mean per p first: a = mean(mean(1, 3), 8) = 5.
    _, per = group_means(values, frame, ["g"], "p")
    assert per.tolist() == [[5.0, 5.0]]


def test_interval_estimates_are_the_point_tables_bit_for_bit(run):  # noqa: F811
    """Fed the accuracies the bootstrap's replicate 0 holds, the point tables give exactly
    the intervals' estimates: one kernel, two callers."""
    _, _, t = run
    iv = t["intervals"]
    acc = iv.filter(pl.col("metric") == "accuracy").select(
        "model", "modality", "perturbation", "severity", pl.col("estimate").alias("accuracy")
    )
    families = {k: v for k, v in FAMILIES.items() if k != "blank"}
    point = modality_tables(acc.filter(pl.col("perturbation") != "blank"), families=families)
    checks = {
        "mmi": (point["mmi"].select("model", "modality", pl.col("scope").alias("key"),
                                    pl.col("group").alias("perturbation"), "mmi"), "mmi"),
        "rscore": (point["rscore"].select("model", "modality", "perturbation", "severity",
                                          "rscore"), "rscore"),
        "rscore_overall": (point["rscore_overall"].select("model", "modality", "perturbation",
                                                          "rscore"), "rscore"),
    }  # fmt: skip
    for metric, (table, value) in checks.items():
        keys = [c for c in table.columns if c != value]
        joined = table.join(iv.filter(pl.col("metric") == metric), on=keys, how="left",
                            nulls_equal=True)  # fmt: skip
        assert joined.height == table.height and joined["estimate"].null_count() == 0, metric
        assert joined[value].to_list() == joined["estimate"].to_list(), metric

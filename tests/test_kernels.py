"""One kernel per statistic (docs/metrics.md, "Uncertainty"): each point table is its
statistic's kernel over the observed accuracies (one replicate), and the bootstrap runs
the same kernel over every replicate, so the two agree by construction, bit for bit."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.simulated_study import FAMILIES
from vqarobust.analyses.accuracy import perturbation_accuracy
from vqarobust.metrics.accuracy import SUBSET, TYPES, accuracy_tables, typed_sums
from vqarobust.metrics.context import context_arrays, context_flags, context_sums, context_tables
from vqarobust.metrics.grouping import group_means, with_rows
from vqarobust.metrics.image_reliance import image_reliance, reliance_ratio
from vqarobust.metrics.intervals import uncertainty_tables
from vqarobust.metrics.mmi import SCOPES, mmi_arrays, mmi_table
from vqarobust.metrics.modalities import modality_tables
from vqarobust.metrics.robustness import (
    accuracy_cube,
    robustness_tables,
    softmax_weights,
    vre_arrays,
)
from vqarobust.metrics.rscore import rscore_arrays, rscore_tables
from vqarobust.metrics.uncertainty import (
    CLUSTERS,
    INTERVAL_SCHEMA,
    Settings,
    cluster_index,
    cluster_sums,
    replicate_weights,
)

CORRUPTIONS = ("fog", "snow", "zoom")
FAMILY = {"fog": "weather", "snow": "weather", "zoom": "blur"}


@st.composite
def gap_free_tables(draw: st.DrawFn) -> pl.DataFrame:
    """A gap-free accuracy table: 1-3 models, a clean row each, 1-3 corruptions with
    1-5 severities (the same for every model), accuracies on a 1/64 grid."""
    models = [f"m{i}" for i in range(draw(st.integers(1, 3)))]
    corruptions = CORRUPTIONS[: draw(st.integers(1, 3))]
    levels = {c: draw(st.integers(1, 5)) for c in corruptions}
    cells = [(m, "clean", 0) for m in models]
    cells += [(m, c, s) for m in models for c in corruptions for s in range(1, levels[c] + 1)]
    values = draw(st.lists(st.integers(0, 64), min_size=len(cells), max_size=len(cells)))
    rows = [(*cell, v / 64) for cell, v in zip(cells, values, strict=True)]
    return pl.DataFrame(
        rows, schema=["model", "perturbation", "severity", "accuracy"], orient="row"
    )


def _replicates(table: pl.DataFrame, extra: np.ndarray) -> np.ndarray:
    """The observed accuracies as replicate 0, then other replicates."""
    return np.vstack([table["accuracy"].to_numpy()[None, :], extra])


@settings(max_examples=60, deadline=None)
@given(gap_free_tables(), st.integers(0, 2**32 - 1))
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
        means = (
            part.filter(pl.col("severity") > 0)
            .group_by("perturbation")
            .agg(pl.col("accuracy").mean())["accuracy"]
        )
        row = point.filter(pl.col("model") == model, pl.col("scope") == "all").row(0, named=True)
        assert np.isclose(row["perturbed"], means.mean(), rtol=0, atol=1e-12)
        expected = (clean - means.mean()) / clean if clean > 0 else 0.0
        assert np.isclose(row["mmi"], expected, rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(gap_free_tables(), st.floats(0, 5), st.floats(1, 60))
def test_rscore_tables_are_their_kernel_at_the_observed_replicate(table, tolerance, gap):
    maximum = min(tolerance + gap, 100.0)
    per_level, overall = rscore_tables(table, tolerance, maximum)
    r = rscore_arrays(table["accuracy"].to_numpy()[None, :], with_rows(table), tolerance, maximum)
    order = r.labels.with_columns(pl.Series("rscore", r.rscore[0]), pl.Series("di", r.acc_di[0]))
    order = order.sort("model", "perturbation", "severity")
    assert per_level["rscore"].to_list() == order["rscore"].to_list()
    assert per_level["acc_di"].to_list() == order["di"].to_list()
    lab = r.overall_labels.with_columns(pl.Series("rscore", r.overall[0])).sort(
        "model", "perturbation"
    )
    assert overall["rscore"].to_list() == lab["rscore"].to_list()
    assert overall["levels"].to_list() == lab["levels"].to_list()
    # The per-perturbation score is that of the mean deterioration over its levels.
    sm, st_ = np.sqrt(maximum), np.sqrt(tolerance)
    for row in overall.iter_rows(named=True):
        di = per_level.filter(
            pl.col("model") == row["model"], pl.col("perturbation") == row["perturbation"]
        )["acc_di"]
        assert row["levels"] == di.len()
        assert np.isclose(row["acc_di"], di.mean(), rtol=0, atol=1e-9)
        expected = np.clip((sm - np.sqrt(row["acc_di"])) / (sm - st_), 0, 1)
        assert row["rscore"] == expected


@settings(max_examples=30, deadline=None)
@given(gap_free_tables())
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


def test_interval_estimates_are_the_point_tables_bit_for_bit(simulated_run):
    """Fed the accuracies the bootstrap's replicate 0 holds, the point tables give exactly
    the intervals' estimates: one kernel, two callers."""
    _, _, t = simulated_run
    iv = t["intervals"]
    acc = iv.filter(pl.col("metric") == "accuracy").select(
        "model", "modality", "perturbation", "severity", pl.col("estimate").alias("accuracy")
    )
    families = {k: v for k, v in FAMILIES.items() if k != "blank"}
    point = modality_tables(acc.filter(pl.col("perturbation") != "blank"), families=families)
    checks = {
        "mmi": (
            point["mmi"].select(
                "model",
                "modality",
                pl.col("scope").alias("key"),
                pl.col("group").alias("perturbation"),
                "mmi",
            ),
            "mmi",
        ),
        "rscore": (
            point["rscore"].select("model", "modality", "perturbation", "severity", "rscore"),
            "rscore",
        ),
        "rscore_overall": (
            point["rscore_overall"].select("model", "modality", "perturbation", "rscore"),
            "rscore",
        ),
    }
    for metric, (table, value) in checks.items():
        keys = [c for c in table.columns if c != value]
        joined = table.join(
            iv.filter(pl.col("metric") == metric), on=keys, how="left", nulls_equal=True
        )
        assert joined.height == table.height and joined["estimate"].null_count() == 0, metric
        assert joined[value].to_list() == joined["estimate"].to_list(), metric


# --- every statistic with an interval: the table's number is the interval's estimate ----

KEYS = ("model", "modality", "perturbation", "severity", "key")


def _keyed(frame: pl.DataFrame, value: str, **cols: object) -> pl.DataFrame:
    """``frame`` as (KEYS..., value): ``cols`` rename (str) or fix (pl.Expr) key columns."""
    exprs = []
    for k in KEYS:
        c = cols.get(k, k if k in frame.columns else None)
        if isinstance(c, pl.Expr):
            exprs.append(c.alias(k))
        elif c is None:
            exprs.append(pl.lit(None).alias(k))
        else:
            exprs.append(pl.col(c).alias(k))
    out = frame.select(*exprs, pl.col(value).cast(pl.Float64).alias("value"))
    return out.with_columns(pl.col(k).cast(t) for k, t in INTERVAL_SCHEMA.items() if k in KEYS)


def _point_tables(
    scored: pl.DataFrame, questions: pl.DataFrame, families: dict[str, str], controls: list[str]
) -> dict[str, pl.DataFrame]:
    """Each interval metric's numbers as the workflow's point tables give them (the
    analyses' library calls), keyed like the ``intervals`` table."""
    accuracy = accuracy_tables(scored, questions)
    acc = accuracy["accuracy"]
    counted = perturbation_accuracy(acc).filter(~pl.col("perturbation").is_in(controls))
    point = modality_tables(
        counted, families={k: v for k, v in families.items() if k not in controls}
    )
    sub, vm, vc = point["submetrics"], point["vre_model"], point["vre_perturbation"]
    vf = point["vre_family"]
    mmi = point["mmi"]
    out = {
        "accuracy": _keyed(acc, "accuracy"),
        "vre_model": _keyed(vm, "vre"),
        "vre_perturbation": _keyed(vc, "vre", model=None),
        "relative_drop_paper": pl.concat(
            [
                _keyed(vm, "relative_drop"),
                _keyed(vc, "relative_drop", model=None),
                _keyed(sub, "relative_drop"),
            ]
        ),
        "relative_drop_eq8": _keyed(vc, "relative_drop_eq8", model=None),
        "vre_family": _keyed(vf, "vre", perturbation="family", key=pl.lit("family")),
        "relative_drop_family": _keyed(
            vf, "relative_drop", perturbation="family", key=pl.lit("family")
        ),
        "mmi": _keyed(mmi, "mmi", perturbation="group", key="scope"),
        "perturbed_accuracy": _keyed(
            mmi.filter(pl.col("scope") == "all"), "perturbed", perturbation=None
        ),
        "rscore": _keyed(point["rscore"], "rscore"),
        "rscore_overall": _keyed(point["rscore_overall"], "rscore"),
        "image_reliance_ratio": _keyed(
            image_reliance(perturbation_accuracy(acc), controls),
            "ratio",
            modality=pl.lit("image"),
            perturbation="control",
        ),
    }
    for m in (
        "first_drop",
        "range_of_error",
        "error_rate",
        "average_error",
        "corruption_error_diff",
    ):
        out[m] = _keyed(sub, m)
    for kind in TYPES:
        out[f"{kind}_accuracy"] = _keyed(accuracy[f"{kind}_accuracy"], "accuracy", key=kind)
    context = context_tables(scored)
    out["context_reliance"] = _keyed(
        context["context_reliance"], "reliance", modality=pl.lit("context")
    )
    out["effective_accuracy"] = _keyed(
        context["effective_accuracy"], "effective_accuracy", modality=pl.lit("context")
    )
    return out


def _with_swaps(scored: pl.DataFrame, seed: int) -> pl.DataFrame:
    """``scored`` and, per model and question, answers under two swaps of each kind: the
    clean answer, or another one (a third of the time)."""
    clean = scored.filter(pl.col("modality") == "clean")
    rng = np.random.default_rng(seed)
    swaps = []
    for kind in ("swap_class", "swap_attribute"):
        for severity in (1, 2):
            flip = rng.random(clean.height) < 1 / 3
            swaps.append(
                clean.with_columns(
                    pl.lit("context").alias("modality"),
                    pl.lit(kind).alias("perturbation"),
                    pl.lit(severity, pl.Int16).alias("severity"),
                    pl.when(pl.Series(flip))
                    .then(pl.lit("other"))
                    .otherwise("answer")
                    .alias("answer"),
                    pl.when(pl.Series(flip)).then(0.0).otherwise("score").alias("score"),
                )
            )
    return pl.concat([scored, *swaps])


# Statistics with an interval and no table of their own: R_score's mean over the levels
# (the report takes the mean of the rscore table's levels; checked below).
NO_POINT_TABLE = {"rscore_mean"}


@pytest.mark.parametrize("cluster", ["image", "question"])
def test_every_interval_estimate_is_its_point_table_bit_for_bit(simulated_run, cluster):
    """Every statistic with an interval: the analyses' point tables hold exactly its
    estimates, whatever the resampling unit, since both are one kernel at the data."""
    q, scored, _ = simulated_run
    scored = _with_swaps(scored, 5)
    # The bootstrap reads the rows in another order (the analyses' inputs differ: image
    # order and question order): the sums are the same bits.
    shuffled = scored.sample(fraction=1.0, shuffle=True, seed=3)
    t = uncertainty_tables(
        shuffled, q, Settings(resamples=20, cluster=cluster), families=FAMILIES, controls=["blank"]
    )
    iv = t["intervals"]
    point = _point_tables(scored, q, FAMILIES, ["blank"])
    assert set(iv["metric"]) == set(point) | NO_POINT_TABLE
    for metric, table in point.items():
        est = iv.filter(pl.col("metric") == metric).select(*KEYS, "estimate")
        joined = est.join(table, on=list(KEYS), how="left", nulls_equal=True)
        assert joined.height == est.height and est.height, metric
        assert joined["estimate"].to_list() == joined["value"].fill_nan(None).to_list(), metric
    levels = (
        point["rscore"]
        .group_by("model", "modality", "perturbation")
        .agg(pl.col("value").mean().alias("value"))
    )
    mean = iv.filter(pl.col("metric") == "rscore_mean").join(
        levels, on=["model", "modality", "perturbation"], how="left"
    )
    assert mean.height and ((mean["estimate"] - mean["value"]).abs() < 1e-15).all()


@st.composite
def per_question_rows(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Scored rows of 1-2 models on 1-3 subsets of 1-12 questions (not every question in
    every subset), scores on the VQA grid or any float in [0, 1], and the questions with
    1-4 images."""
    n_q = draw(st.integers(1, 12))
    images = draw(st.lists(st.integers(0, 3), min_size=n_q, max_size=n_q))
    kinds = draw(st.lists(st.sampled_from(["what", "how", None]), min_size=n_q, max_size=n_q))
    questions = pl.DataFrame(
        {
            "question_id": range(n_q),
            "image_id": images,
            "question_type": kinds,
            "answer_type": "other",
        }
    )
    score = st.one_of(st.sampled_from([0.0, 0.3, 0.6, 0.9, 1.0]), st.floats(0, 1, allow_nan=False))
    rows = []
    for model in ("m0", "m1")[: draw(st.integers(1, 2))]:
        for sub, severity in (("clean", 0), ("fog", 1), ("fog", 2))[: draw(st.integers(1, 3))]:
            for q in draw(st.sets(st.integers(0, n_q - 1), min_size=1)):
                rows.append((model, sub, sub, severity, q, draw(score), draw(st.booleans())))
    scored = pl.DataFrame(
        rows,
        orient="row",
        schema={
            "model": pl.String,
            "modality": pl.String,
            "perturbation": pl.String,
            "severity": pl.Int16,
            "question_id": pl.Int64,
            "score": pl.Float64,
            "truncated": pl.Boolean,
        },
    )
    return scored, questions


@settings(max_examples=80, deadline=None)
@given(per_question_rows(), st.integers(0, 2**32 - 1))
def test_accuracy_table_is_its_kernel_at_the_data_whatever_the_clusters(data, seed):
    scored, questions = data
    tables = accuracy_tables(scored, questions)
    table = tables["accuracy"]
    for cluster in CLUSTERS:
        mapping, n = cluster_index(questions, cluster)
        # In any order: the kernel adds the questions up by question id.
        rows = scored.join(mapping, on="question_id").sample(fraction=1.0, shuffle=True, seed=seed)
        sums = cluster_sums(rows, SUBSET, ["score"], n)
        w = replicate_weights(n, 3, seed)
        acc = sums.means("score", w)
        assert sums.keys.equals(table.select(SUBSET))
        # Bit for bit: replicate 0 is the table, however questions are clustered.
        assert acc[0].tolist() == table["accuracy"].to_list()
        # The resamples: each question weighs as often as its cluster is drawn.
        for g, key in enumerate(sums.keys.iter_rows()):
            part = rows.filter(*(pl.col(k) == v for k, v in zip(SUBSET, key, strict=True)))
            wq = w[:, part["cluster"].to_numpy()]
            with np.errstate(invalid="ignore"):
                expect = (wq * part["score"].to_numpy()).sum(1) / wq.sum(1)
            assert np.allclose(acc[:, g], expect, equal_nan=True, rtol=0, atol=1e-12)
        typed = typed_sums(rows, questions, "question_type", n).means("score", w)
        assert typed[0].tolist() == tables["question_type_accuracy"]["accuracy"].to_list()
    n = scored.group_by(SUBSET).agg(pl.len().alias("n"), pl.col("truncated").sum().alias("t"))
    joined = table.join(n, on=list(SUBSET))
    assert (joined["n"] == joined["n_right"]).all() and (joined["truncated"] == joined["t"]).all()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), min_size=1, max_size=6))
def test_image_reliance_is_its_kernel_at_the_data(pairs):
    acc = pl.DataFrame(
        {
            "model": [f"m{i}" for i in range(len(pairs))] * 2,
            "perturbation": ["clean"] * len(pairs) + ["blank"] * len(pairs),
            "severity": [0] * len(pairs) + [1] * len(pairs),
            "accuracy": [c / 8 for c, _ in pairs] + [b / 8 for _, b in pairs],
        }
    )
    table = image_reliance(acc, ["blank"])
    clean = np.array([c / 8 for c, _ in pairs])
    blank = np.array([b / 8 for _, b in pairs])
    ratio = reliance_ratio(blank[None], clean[None])[0]  # the kernel the bootstrap calls
    assert table["ratio"].to_list() == [None if np.isnan(r) else r for r in ratio.tolist()]
    # By hand: blank over clean, none where the clean accuracy is 0.
    by_hand = [b / c if c else None for c, b in zip(clean.tolist(), blank.tolist(), strict=True)]
    assert table["ratio"].to_list() == by_hand


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10), st.integers(0, 2**32 - 1))
def test_context_tables_are_their_kernel_at_the_data(n_q, seed):
    questions = pl.DataFrame({"question_id": range(n_q), "image_id": [i // 2 for i in range(n_q)]})
    rng = np.random.default_rng(seed)
    score = rng.choice([0.0, 0.3, 1.0], n_q)
    clean = pl.DataFrame(
        {
            "model": "m",
            "modality": "clean",
            "perturbation": "clean",
            "severity": pl.Series([0] * n_q, dtype=pl.Int16),
            "question_id": range(n_q),
            "answer": "a",
            "score": score,
        }
    )
    swapped = clean.sample(fraction=rng.uniform(0, 1), seed=seed % 1000)["question_id"]
    scored = _with_swaps(clean, seed).filter(
        (pl.col("modality") == "clean") | pl.col("question_id").is_in(swapped.to_list())
    )
    tables = context_tables(scored)
    if swapped.is_empty():  # no swaps: both tables empty
        assert all(t.is_empty() for t in tables.values())
        return
    mapping, n = cluster_index(questions, "image")
    flags = context_flags(scored).join(mapping, on="question_id")
    reliance, effective = context_arrays(context_sums(flags, n), replicate_weights(n, 4, seed))
    eff = tables["effective_accuracy"]
    assert eff["effective_accuracy"].to_list() == effective[0].tolist()
    rel = dict(tables["context_reliance"].select("perturbation", "reliance").iter_rows())
    by_key = dict(zip(eff["perturbation"], reliance[0].tolist(), strict=True))
    assert rel == {k: v for k, v in by_key.items() if not np.isnan(v)}
    # By hand, over any swap: reliance = correct and changed / correct; effective =
    # correct and unchanged / all questions.
    changed = set(scored.filter(pl.col("answer") == "other")["question_id"])
    correct = {q for q in range(n_q) if score[q] >= 1}
    every = eff.filter(pl.col("perturbation") == "all").row(0, named=True)
    assert every["n_questions"] == n_q
    assert every["n_effective"] == len(correct - changed)
    assert every["effective_accuracy"] == len(correct - changed) / n_q
    assert rel.get("all") == (len(correct & changed) / len(correct) if correct else None)


def test_an_answer_to_an_unknown_question_is_an_error():
    scored = pl.DataFrame(
        {
            "model": ["m", "m"],
            "modality": "clean",
            "perturbation": "clean",
            "severity": 0,
            "question_id": [1, 7],
            "score": [1.0, 0.0],
            "truncated": False,
        }
    )
    questions = pl.DataFrame(
        {"question_id": [1, 2], "image_id": [1, 1], "question_type": "what", "answer_type": "other"}
    )
    with pytest.raises(
        ValueError, match=r"1 questions answered have no question row \(e.g. \[7\]\)"
    ):
        accuracy_tables(scored, questions)

"""How many images are enough (issue 44, item 10): the planner's arithmetic by hand, its
tables from a run's intervals, its command, and a simulation that draws datasets of the
planned sizes and measures the half-width and power they reach."""

from __future__ import annotations

import math

import duckdb
import polars as pl
import pytest

from vqarobust.cli import main
from vqarobust.db import DatabaseInputs, build_database
from vqarobust.metrics.sample_size import (
    Target,
    images_for_half_width,
    images_to_detect,
    plan_comparisons,
    plan_size,
    plan_statistics,
)
from vqarobust.metrics.simulation import (
    SimulatedModel,
    SimulatedStudy,
    check_plan,
    simulate_questions,
    simulate_scored,
    write_questions,
)


def test_images_for_a_half_width_by_hand():
    # sd per image = 0.01 * sqrt(100) = 0.1; (1.959964 * 0.1 / 0.01)^2 = 384.15 -> 385.
    assert images_for_half_width(0.01, 100, Target(half_width=0.01)) == 385
    # Half the half-width, four times the images: (1.959964 * 0.1 / 0.005)^2 = 1536.58.
    assert images_for_half_width(0.01, 100, Target(half_width=0.005)) == 1537
    # A 90% interval: z = 1.644854; (1.644854 * 0.1 / 0.01)^2 = 270.55 -> 271.
    assert images_for_half_width(0.01, 100, Target(half_width=0.01, level=0.9)) == 271
    assert images_for_half_width(0.0, 100, Target()) is None
    assert images_for_half_width(float("nan"), 100, Target()) is None


def test_images_to_detect_a_difference_by_hand():
    # sd = 0.02 * sqrt(100) = 0.2; ((1.959964 + 0.841621) * 0.2 / 0.05)^2 = 125.58 -> 126.
    assert images_to_detect(0.02, 100, Target(detect=0.05, power=0.8)) == 126
    # 90% power: z = 1.281552; ((1.959964 + 1.281552) * 0.2 / 0.05)^2 = 168.12 -> 169.
    assert images_to_detect(0.02, 100, Target(detect=0.05, power=0.9)) == 169


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"half_width": 0}, "half_width must be > 0"),
        ({"detect": -0.1}, "detect must be > 0"),
        ({"power": 1.0}, "power must be between 0 and 1"),
        ({"level": 0}, "level must be between 0 and 1"),
    ],
)
def test_a_target_out_of_range_is_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Target(**kwargs)


def _intervals() -> pl.DataFrame:
    rows = [
        # metric, model, modality, perturbation, severity, key, estimate, low, high, se
        ("accuracy", "a", "clean", "clean", 0, None, 0.8, 0.74, 0.86, 0.03),
        ("accuracy", "b", "clean", "clean", 0, None, 0.7, 0.62, 0.78, 0.04),
        ("accuracy", "a", "image", "snow", 1, None, 0.6, 0.5, 0.7, 0.05),  # not headline
        ("vre_model", "a", "image", None, None, None, 0.2, 0.1, 0.3, 0.05),
        ("vre_model", "b", "image", None, None, None, 0.4, 0.3, 0.5, 0.05),
        ("mmi", "a", "image", "all", None, "all", 0.25, 0.2, 0.3, 0.02),
        ("mmi", "a", "image", "snow", None, "snow", 0.3, 0.2, 0.4, 0.05),  # per corruption
    ]
    cols = [
        "metric",
        "model",
        "modality",
        "perturbation",
        "severity",
        "key",
        "estimate",
        "low",
        "high",
        "se",
    ]
    return pl.DataFrame(rows, schema=cols, orient="row")


def test_the_plan_reads_each_headline_statistic_and_pair_from_the_intervals():
    target = Target(half_width=0.01, detect=0.05)
    stats = plan_statistics(_intervals(), 100, target)
    assert stats.select("statistic", "modality", "model").rows() == [
        ("clean accuracy", "clean", "a"),
        ("clean accuracy", "clean", "b"),
        ("relative drop", "image", "a"),
        ("VRE", "image", "a"),
        ("VRE", "image", "b"),
    ]
    # clean a: sd 0.3, (1.959964 * 0.3 / 0.01)^2 = 3457.3 -> 3458; half-width (0.86-0.74)/2.
    row = stats.row(0, named=True)
    assert row["images_needed"] == 3458 and row["half_width"] == pytest.approx(0.06)
    assert row["sd_per_image"] == pytest.approx(0.3)
    comparisons = pl.DataFrame(
        {
            "modality": ["clean", "image"],
            "metric": ["clean_accuracy", "vre"],
            "model_a": ["a", "a"],
            "model_b": ["b", "b"],
            "difference": [0.1, -0.2],
            "low": [0.05, -0.3],
            "high": [0.15, -0.1],
            "se": [0.03, 0.0],
            "distinguishable": [True, True],
        }
    )
    pairs = plan_comparisons(comparisons, _intervals(), 100, target).rows(named=True)
    # var(a - b) = 0.03^2 = 0.03^2 + 0.04^2 - 2 cov -> cov = 0.0008, corr = 0.0008 / 0.0012.
    assert pairs[0]["correlation"] == pytest.approx(2 / 3)
    # sd 0.3: ((1.959964 + 0.841621) * 0.3 / 0.05)^2 = 282.56 -> 283.
    assert pairs[0]["images_needed"] == 283
    assert pairs[1]["images_needed"] is None  # no spread in the pilot: no plan
    assert pairs[1]["correlation"] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    """A results database of two simulated models on 150 images."""
    folder = tmp_path_factory.mktemp("pilot")
    q = simulate_questions(150, [3, 4, 5], seed=3)
    write_questions(q, folder / "q.parquet")
    drops = {("image", "snow", s): 0.05 * s for s in (1, 2, 3)}
    models = {"a": SimulatedModel(0.75, drops), "b": SimulatedModel(0.7, drops)}
    simulate_scored(q, models, seed=3).drop("score").write_parquet(folder / "p.parquet")
    db = folder / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(folder / "q.parquet", [folder / "p.parquet"]),
        families={"snow": "weather"},
        uncertainty={"resamples": 300},
    )
    return db


def test_plan_size_on_a_run_scales_its_standard_errors(pilot):
    plan = plan_size(str(pilot), Target(half_width=0.02, detect=0.05))
    assert plan.n_pilot == 150
    with duckdb.connect(str(pilot), read_only=True) as con:
        (se,) = con.execute(
            "SELECT se FROM intervals WHERE metric = 'accuracy' AND "
            "modality = 'clean' AND model = 'a'"
        ).fetchall()[0]
        (se_d,) = con.execute(
            "SELECT se FROM model_comparisons WHERE metric = 'clean_accuracy'"
        ).fetchall()[0]
    clean_a = plan.statistics.filter(
        pl.col("statistic") == "clean accuracy", pl.col("model") == "a"
    )
    assert clean_a["images_needed"][0] == math.ceil((1.959964 * se * math.sqrt(150) / 0.02) ** 2)
    pair = plan.comparisons.filter(pl.col("metric") == "clean_accuracy")
    assert pair["images_needed"][0] == math.ceil(
        ((1.959964 + 0.841621) * se_d * math.sqrt(150) / 0.05) ** 2
    )
    sides = set(plan.statistics["modality"])
    assert sides == {"clean", "image"}


def test_the_command_prints_the_plan_and_checks_a_committed_one(pilot, tmp_path, capsys):
    assert main(["plan-size", str(pilot), "--half-width", "0.02", "--detect", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"<!-- generated by `vqarobust plan-size {pilot} --half-width 0.02 "
        "--detect 0.05 --power 0.8 --level 0.95`"
    )
    assert "Pilot: 150 images." in out and "| clean accuracy | clean | a |" in out
    committed = tmp_path / "plan.md"
    committed.write_text(out)
    args = [
        "plan-size",
        str(pilot),
        "--half-width",
        "0.02",
        "--detect",
        "0.05",
        "--check",
        str(committed),
    ]
    assert main(args) == 0
    line = next(x for x in out.splitlines() if x.startswith("| clean accuracy | clean | a |"))
    committed.write_text(out.replace(line, line[: line.rindex("|", 0, -1)] + "| 1 |"))
    assert main(args) == 1
    assert "is not what this run produces" in capsys.readouterr().err


def test_the_command_names_a_bad_file_and_a_bad_target(pilot, tmp_path, capsys):
    assert main(["plan-size", str(tmp_path / "none.duckdb")]) == 2
    assert "none.duckdb" in capsys.readouterr().err
    assert main(["plan-size", str(pilot), "--power", "1.5"]) == 2
    assert "power must be between 0 and 1, got 1.5" in capsys.readouterr().err


def test_datasets_of_the_planned_sizes_reach_the_target():
    """From one pilot of 200 simulated images (correlated questions), the planned sizes
    give 95% intervals whose mean half-width is within 12% of the target, and find the
    true difference in 80% +- 10% of 80 datasets."""
    target = Target(half_width=0.02, detect=0.03)
    check = check_plan(target, SimulatedStudy(concentration=4.0), n_sets=80, resamples=300)
    assert check.accuracy_images > 200 and check.detect_images > check.accuracy_images
    assert check.accuracy_half_width == pytest.approx(0.02, rel=0.12)
    assert check.drop_half_width == pytest.approx(0.02, rel=0.12)
    assert 0.7 <= check.power <= 0.9, check


def test_a_small_pilot_is_warned_of_and_one_without_intervals_refused(tmp_path):
    from vqarobust.metrics.sample_size import Plan, to_markdown

    empty = pl.DataFrame()
    text = to_markdown(
        Plan(20, Target(), plan_statistics(_intervals(), 20, Target()), empty), "cmd"
    )
    assert "Warning: the pilot has 20 images, fewer than 30" in text
    q = simulate_questions(20, 3, seed=1)
    write_questions(q, tmp_path / "q.parquet")
    scored = simulate_scored(q, {"a": SimulatedModel(0.7, {("image", "snow", 1): 0.1})}, seed=1)
    scored.drop("score").write_parquet(tmp_path / "p.parquet")
    db = tmp_path / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(tmp_path / "q.parquet", [tmp_path / "p.parquet"]),
        families={"snow": "weather"},
        uncertainty={"resamples": 0},
    )
    with pytest.raises(ValueError, match=r"no intervals \(uncertainty.resamples: 0\)"):
        plan_size(str(db), Target())


def _rows(path) -> list[list[str]]:
    """The body rows of every Markdown table in a generated plan file."""
    lines = [x for x in path.read_text().splitlines() if x.startswith("| ") and "---" not in x]
    return [[c.strip() for c in x.strip("|").split("|")] for x in lines]


def test_the_docs_quote_the_generated_plans():
    """docs/metrics.md's sentences on the two plans are the committed plan files' numbers
    (.ci/run checks the default one against its run)."""
    from tests.conftest import REPO

    docs = (REPO / "docs" / "metrics.md").read_text()
    text = " ".join(docs[docs.index("### How many images are enough") :].split())
    default = {(r[0], r[1], r[2]): r for r in _rows(REPO / "docs/results/plan-size-default.md")}
    assert (
        f"clean accuracy needs {default['clean accuracy', 'clean', 'cnn-bow'][6]} images "
        f"(cnn-bow) and {default['clean accuracy', 'clean', 'vilt-tiny'][6]} (vilt-tiny)" in text
    )
    assert f"image-side VRE needs {default['VRE', 'image', 'cnn-bow'][6]} (cnn-bow)" in text
    pairs = {
        (r[0], r[1]): r
        for r in _rows(REPO / "docs/results/plan-size-default.md")
        if r[0] in ("clean_accuracy", "perturbed_accuracy")
    }
    clean, image = pairs["clean_accuracy", "clean"], pairs["perturbed_accuracy", "image"]
    assert (
        f"0.02 needs {clean[6]} images, their image-side mean perturbed accuracy "
        f"{image[6]} (correlation {float(image[5]):.2f})"
    ) in text
    paper = _rows(REPO / "docs/results/plan-size-paper-pilot.md")

    def span(rows: list[list[str]]) -> str:
        n = sorted(int(r[6].replace(",", "")) for r in rows)
        return f"{n[0]:,} to {n[-1]:,}"

    assert f"clean accuracy needs {span([r for r in paper if r[0] == 'clean accuracy'])}" in text
    drops = [int(r[6].replace(",", "")) for r in paper if r[0] == "relative drop"]
    assert f"the relative drop needs at most {max(drops)}" in text
    vre = [r for r in paper if r[0] == "VRE" and r[1] == "image"]
    assert f"image-side VRE needs {span(vre)}" in text
    assert f"0.02 needs {span([r for r in paper if r[0] == 'clean_accuracy'])}" in text

"""The summary's and the report's words follow the intervals, and their numbers add up."""

from __future__ import annotations

import re

import pytest

from vqarobust.db import DatabaseInputs, build_database
from vqarobust.metrics.simulation import (
    SimulatedModel,
    simulate_questions,
    simulate_scored,
    write_questions,
)
from vqarobust.report import render_report
from vqarobust.summary import summarize, to_markdown

CORRUPTIONS = ("gaussian_noise", "defocus_blur", "snow")


def _drops(scale: float) -> dict[tuple[str, str, int], float]:
    return {
        ("image", c, s): min(0.95, scale * 0.04 * s * (1 + i))
        for i, c in enumerate(CORRUPTIONS)
        for s in range(1, 6)
    }


def _database(folder, models: dict[str, SimulatedModel], seed: int, resamples: int = 400):
    """A results database of simulated answers ("right" scores 1, "wrong" 0)."""
    folder.mkdir(parents=True, exist_ok=True)
    q = simulate_questions(150, [3, 4, 5, 6, 7], seed=seed)
    write_questions(q, folder / "q.parquet")
    scored = simulate_scored(q, models, seed=seed)
    scored.drop("score").write_parquet(folder / "p.parquet")
    families = {"gaussian_noise": "noise", "defocus_blur": "blur", "snow": "weather"}
    db = folder / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(folder / "q.parquet", [folder / "p.parquet"]),
        families=families,
        uncertainty={"resamples": resamples},
    )
    return db


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("words")
    same = {"a": SimulatedModel(0.7, _drops(1.0)), "b": SimulatedModel(0.7, _drops(1.0))}
    apart = {"a": SimulatedModel(0.7, _drops(0.5)), "b": SimulatedModel(0.7, _drops(2.0))}
    return {
        "same": _database(root / "same", same, seed=5),
        "apart": _database(root / "apart", apart, seed=5),
    }


def _reading(db, tmp_path) -> str:
    html = render_report(db, tmp_path / "report" / "index.html").read_text()
    return re.search(r'<p class="reading">(.*?)</p>', html, flags=re.S).group(1)


def test_models_that_differ_by_noise_are_called_indistinguishable(runs, tmp_path):
    s = summarize(runs["same"])
    c = s.comparisons.row(0, named=True)
    assert c["low"] < 0 < c["high"] and not c["distinguishable"]
    md = to_markdown(s, "cmd")
    assert "a and b are indistinguishable at 95%" in md
    assert "more robust than" not in md
    reading = _reading(runs["same"], tmp_path)
    assert "indistinguishable at 95%" in reading and "more robust than" not in reading


def test_models_that_differ_clearly_are_ranked(runs, tmp_path):
    s = summarize(runs["apart"])
    c = s.comparisons.row(0, named=True)
    assert c["high"] < 0 and c["distinguishable"]  # a - b: a has the lower VRE
    md = to_markdown(s, "cmd")
    assert "a is more robust than b" in md and "indistinguishable" not in md
    assert "a is more robust than b" in _reading(runs["apart"], tmp_path)


def _num(text: str) -> float:
    return float(text.replace("%", "")) / (100 if text.endswith("%") else 1)


@pytest.mark.parametrize("kind", ["same", "apart"])
def test_printed_numbers_add_up(runs, kind, tmp_path):
    """Recompute every derived number of the summary and the reading from the numbers
    printed beside it (3 decimals: each may be off by half a unit of the last digit)."""
    md = to_markdown(summarize(runs[kind]), "cmd")
    vre = {}
    for line in md.splitlines():
        m = re.match(
            r"\| (\w+) \| ([\d.]+) \[([\d.]+), ([\d.]+)\] \| ([\d.]+) \[[^]]+\] \| "
            r"([\d.]+) \[[^]]+\] \| ([\d.]+) \[([\d.]+), ([\d.]+)\] \|",
            line,
        )
        if not m:
            continue
        clean, low, high, pert, drop = (float(m.group(i)) for i in (2, 3, 4, 5, 6))
        vre[m.group(1)] = float(m.group(7))
        assert low <= clean <= high
        # (clean - corrupted) / clean from the rounded numbers, with their rounding error.
        slack = 0.0005 * (1 / clean + pert / clean**2) + 0.0005
        assert abs((clean - pert) / clean - drop) <= slack, line
    assert set(vre) == {"a", "b"}
    for m in re.finditer(
        r"VRE ([\d.]+) vs ([\d.]+), difference (-?[\d.]+) \[(-?[\d.]+), "
        r"(-?[\d.]+)\]",
        md,
    ):
        better, worse, diff, low, high = (float(g) for g in m.groups())
        assert abs((better - worse) - diff) <= 0.0011 and high < 0 and low <= diff <= high
    family = r"over the 1 pairwise comparison of image-side VRE"
    for m in re.finditer(
        r"VRE difference (-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]; "
        rf"Holm-adjusted p = ([\d.]+) {family}",
        md,
    ):
        diff, low, high, p = (float(g) for g in m.groups())
        # Called indistinguishable only at an adjusted p of 5% or more.
        assert p >= 0.05 and abs(diff - (vre["a"] - vre["b"])) <= 0.0011 and low <= diff <= high
    for m in re.finditer(
        rf"difference -?[\d.]+ \[[^]]+\]; Holm-adjusted p = ([\d.]+) {family}"
        r"\)\.",
        md,
    ):
        said_apart = "more robust" in md[max(0, m.start() - 120) : m.start()]
        assert (float(m.group(1)) < 0.05) == said_apart
    reading = _reading(runs[kind], tmp_path)
    m = re.search(
        r"accuracy ([\d.]+) clean and ([\d.]+) on average .*?a relative drop of "
        r"([\d.]+%)",
        reading,
    )
    clean, pert, drop = float(m.group(1)), float(m.group(2)), _num(m.group(3))
    assert abs((clean - pert) / clean - drop) <= 0.0005 * (1 / clean + pert / clean**2) + 0.0005


def test_no_resamples_claims_no_ranking(tmp_path):
    models = {"a": SimulatedModel(0.7, _drops(0.5)), "b": SimulatedModel(0.7, _drops(2.0))}
    db = _database(tmp_path / "off", models, seed=1, resamples=0)
    md = to_markdown(summarize(db), "cmd")
    assert "No intervals (uncertainty.resamples: 0)." in md
    assert "no model is called more robust than another" in md
    assert "[" not in md.split("\n")[3]  # the first model row carries no interval


def test_one_model_gets_no_vre_and_no_rank_but_its_unscaled_submetrics(tmp_path):
    import duckdb

    db = _database(tmp_path, {"solo": SimulatedModel(0.8, _drops(1.0))}, seed=3, resamples=60)
    s = summarize(db)
    text = to_markdown(s, "test")
    header = text.splitlines()[1]
    assert "VRE" not in header and "rank" not in header
    assert "no VRE and no rank are given" in text
    assert "Unscaled sub-metrics of the one model per corruption" in text
    with duckdb.connect(str(db), read_only=True) as con:
        sub = dict(
            con.execute(
                "SELECT perturbation, first_drop FROM submetrics WHERE modality = 'image'"
            ).fetchall()
        )
    got = dict(s.unscaled.select("perturbation", "first_drop").iter_rows())
    assert got == pytest.approx(sub) and set(got) == set(CORRUPTIONS)
    assert (s.unscaled["first_drop_low"] <= s.unscaled["first_drop"]).all()
    row = next(line for line in text.splitlines() if line.startswith("| snow |"))
    assert f"{sub['snow']:.3f} [" in row
    render_report(db, tmp_path / "report" / "index.html")  # renders with one model

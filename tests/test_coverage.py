"""No flattering gaps: a model without clean rows or lacking a subset others have is an
error, unless the caller drops them explicitly (with a warning that reaches run_info)."""

import json

import duckdb
import polars as pl
import pytest

from tests.predictions import write_predictions
from vqarobust import store
from vqarobust.db import DatabaseInputs, build_database
from vqarobust.metrics.coverage import MissingRowsError, check_coverage
from vqarobust.metrics.mmi import mmi_table
from vqarobust.metrics.robustness import RobustnessWarning, robustness_tables
from vqarobust.metrics.rscore import rscore_tables


def _table(cells):
    """cells: {(model, perturbation): [acc at severities 0..5 or 1..5]} plus clean entries."""
    rows = []
    for (model, perturbation), accs in cells.items():
        first = 0 if perturbation == "clean" else 1
        rows += [(model, perturbation, first + i, a) for i, a in enumerate(accs)]
    return pl.DataFrame(
        rows, schema=["model", "perturbation", "severity", "accuracy"], orient="row"
    )


FULL = {
    ("a", "clean"): [0.9],
    ("a", "snow"): [0.8, 0.7, 0.6, 0.5, 0.4],
    ("a", "blur"): [0.85, 0.8, 0.75, 0.7, 0.65],
    ("b", "clean"): [0.8],
    ("b", "blur"): [0.6, 0.5, 0.4, 0.3, 0.2],
}


@pytest.mark.parametrize("metric", ["vre", "mmi", "rscore"])
def test_a_model_without_a_corruption_is_an_error_naming_it(metric):
    table = _table(FULL)  # b has no snow rows at all: it would score a drop of 0 there
    run = {"vre": robustness_tables, "mmi": mmi_table, "rscore": rscore_tables}[metric]
    with pytest.raises(MissingRowsError, match=r"missing: b/snow \(severities \[1, 2, 3, 4, 5\]\)"):
        run(table)


@pytest.mark.parametrize("metric", ["vre", "mmi", "rscore"])
def test_a_model_without_clean_rows_is_an_error(metric):
    table = _table({**FULL, ("b", "snow"): [0.7, 0.6, 0.5, 0.4, 0.3]}).filter(
        ~((pl.col("model") == "b") & (pl.col("perturbation") == "clean"))
    )
    run = {"vre": robustness_tables, "mmi": mmi_table, "rscore": rscore_tables}[metric]
    with pytest.raises(MissingRowsError, match=r"models without clean rows: \['b'\]"):
        run(table)


def test_drop_leaves_the_gap_out_for_every_model_with_a_warning():
    table = _table(FULL)
    with pytest.warns(
        RobustnessWarning,
        match=r"dropped \(on_missing='drop'\): models \[\], "
        r"perturbations \['snow'\]",
    ):
        got = robustness_tables(table, on_missing="drop")
    expected = robustness_tables(table.filter(pl.col("perturbation") != "snow"))
    assert got.vre_model.equals(expected.vre_model)
    assert set(got.submetrics["perturbation"]) == {"blur"}
    with pytest.warns(RobustnessWarning):
        mmi = mmi_table(table, on_missing="drop")
    assert set(mmi["group"]) == {"blur", "all", "all_sets", "unknown"}


def test_a_partly_missing_severity_is_a_gap_but_one_missing_for_all_is_not():
    table = _table({**FULL, ("b", "snow"): [0.7, 0.6, 0.5, 0.4, 0.3]})
    holed = table.filter(
        ~((pl.col("model") == "b") & (pl.col("severity") == 5) & (pl.col("perturbation") == "snow"))
    )
    with pytest.raises(MissingRowsError, match=r"1 \(model, perturbation, severity\) subsets"):
        check_coverage(holed)
    # severities: [1, 3, 5] for every model and corruption: a config choice, no gap.
    sparse = table.filter(pl.col("severity").is_in([0, 1, 3, 5]))
    assert check_coverage(sparse).equals(sparse)
    with pytest.raises(ValueError, match="on_missing must be one of"):
        check_coverage(table, on_missing="ignore")


def test_the_database_refuses_gaps_or_records_the_drop(tmp_path, easy_vqa_eval):
    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    paths = [
        write_predictions(tmp_path, questions, m, "clean", [0], lambda s: 0.9) for m in ("a", "b")
    ]
    paths += [
        write_predictions(tmp_path, questions, "a", c, [1, 2, 3, 4, 5], lambda s: 0.9 - 0.1 * s)
        for c in ("snow", "blur")
    ]
    paths.append(
        write_predictions(
            tmp_path, questions, "b", "blur", [1, 2, 3, 4, 5], lambda s: 0.9 - 0.05 * s
        )
    )
    db = tmp_path / "r.duckdb"
    with pytest.raises(MissingRowsError, match="b/snow"):
        build_database(
            db, DatabaseInputs(easy_vqa_eval["questions"], paths), uncertainty={"resamples": 10}
        )
    assert not db.exists()
    build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths),
        uncertainty={"resamples": 10},
        on_missing="drop",
    )
    with duckdb.connect(str(db), read_only=True) as con:
        warned = json.loads(
            con.execute("SELECT value FROM run_info WHERE key = 'warnings'").fetchone()[0]
        )
        assert any("perturbations ['snow']" in w for w in warned)
        assert {
            r[0] for r in con.execute("SELECT DISTINCT perturbation FROM submetrics").fetchall()
        } == {"blur"}
        boot = con.execute(
            "SELECT DISTINCT perturbation FROM intervals WHERE metric = 'accuracy'"
        ).fetchall()
        assert "snow" not in {r[0] for r in boot}

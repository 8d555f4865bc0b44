"""One vocabulary: a subset is a ``perturbation`` (with its ``modality``) in every table,
view and metric kernel's output; ``corruption`` names only the image family (the config's
``corruptions``, the registry ``vqarobust.corruptions``), never a column that could hold a
text or context perturbation."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from tests.simulated_study import FAMILIES
from vqarobust.metrics.accuracy import accuracy_by
from vqarobust.metrics.mmi import mmi_table
from vqarobust.metrics.modalities import modality_tables
from vqarobust.metrics.robustness import robustness_tables
from vqarobust.metrics.rscore import rscore_tables

# The columns whose values name what a row summarizes (a scope of MMI or of the sweep).
LABEL_COLUMNS = ("scope", "key")


def corruption_columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(table or view, column) of every column named ``corruption`` in the database."""
    return con.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE lower(column_name) = 'corruption' ORDER BY ALL"
    ).fetchall()


def corruption_labels(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(table, column) of every scope or key column that holds the label ``corruption``."""
    found = []
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        f"WHERE column_name IN {LABEL_COLUMNS} AND data_type = 'VARCHAR'"
    ).fetchall():
        hit = con.execute(
            f'SELECT count(*) FROM "{table}" WHERE "{column}" = \'corruption\''
        ).fetchone()[0]
        if hit:
            found.append((table, column))
    return found


def test_the_metric_kernels_name_a_subset_perturbation(simulated_run):
    _, scored, intervals = simulated_run
    acc = accuracy_by(scored, ["model", "modality", "perturbation", "severity"])
    families = {k: v for k, v in FAMILIES.items() if k != "blank"}
    outputs = dict(modality_tables(acc.filter(pl.col("perturbation") != "blank"), None, families))
    image = acc.filter(pl.col("modality").is_in(["clean", "image"])).drop("modality", "n")
    image = image.filter(pl.col("perturbation") != "blank")
    t = robustness_tables(image, families=families)
    outputs |= {f"image {k}": v for k, v in vars(t).items() if v is not None}
    outputs["image mmi"] = mmi_table(image, families)
    outputs["image rscore"], outputs["image rscore_overall"] = rscore_tables(image)
    outputs |= {f"bootstrap {k}": v for k, v in intervals.items()}
    # The study has text and basic-question rows: every kernel saw more than images.
    assert {"text", "basic_question"} <= set(outputs["mmi"]["modality"])
    named = {k: df.columns for k, df in outputs.items() if "corruption" in df.columns}
    assert named == {}
    labels = {
        (k, c)
        for k, df in outputs.items()
        for c in LABEL_COLUMNS
        if c in df.columns and df.schema[c] == pl.String and "corruption" in set(df[c])
    }
    assert labels == set()
    assert "perturbation" in set(outputs["vre_sweep"]["scope"])
    assert "perturbation" in set(outputs["mmi"]["scope"])


def test_the_hand_written_database_names_a_subset_perturbation(database):
    db, _, _ = database
    with duckdb.connect(str(db), read_only=True) as con:
        assert corruption_columns(con) == []
        assert corruption_labels(con) == []
        # The check reads views as well as tables.
        views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        assert "image_accuracy" in views


@pytest.mark.workflow
def test_the_workflows_database_names_a_subset_perturbation(workflow_run):
    workdir, _ = workflow_run
    db = Path(workdir) / "results" / "easy-vqa" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        modalities = {
            m for (m,) in con.execute("SELECT DISTINCT modality FROM accuracy").fetchall()
        }
        assert {"image", "text", "basic_question"} <= modalities
        assert corruption_columns(con) == []
        assert corruption_labels(con) == []

"""The report's per-family table and sentences (vqarobust.report.sections.tables): read
from ``vre_family`` and ``intervals``, and every sentence recomputed from that table."""

from __future__ import annotations

import duckdb
import polars as pl

from vqarobust.report.sections.tables import _vre_family, family_sentences

FAMILY = pl.DataFrame(
    {
        "model": ["a", "a", "a", "b", "b", "c"],
        "modality": ["image"] * 6,
        "family": ["noise", "geometric", "blur", "noise", "geometric", "noise"],
        "n_perturbations": [4, 5, 2, 4, 5, 4],
        "accuracy": [0.6, 0.5, 0.7, 0.6, 0.65, 0.5],
        "relative_drop": [0.20, 0.35, 0.10, 0.25, 0.22, 0.3],
        "vre": [0.4, 0.6, 0.2, 0.5, 0.45, 0.5],
    }
)
# (model, family) -> relative drop interval; a's geometric lies above its other two,
# b's noise overlaps its geometric.
BOUNDS = {
    ("a", "noise"): (0.15, 0.25),
    ("a", "geometric"): (0.30, 0.40),
    ("a", "blur"): (0.05, 0.15),
    ("b", "noise"): (0.20, 0.30),
    ("b", "geometric"): (0.18, 0.26),
    ("c", "noise"): (0.25, 0.35),
}


def _database(with_intervals: bool) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("f", FAMILY.to_arrow())
    con.execute("CREATE TABLE vre_family AS SELECT * FROM f")
    rows = []
    if with_intervals:
        for (model, family), (low, high) in BOUNDS.items():
            rows.append(("relative_drop_family", model, "image", family, low, high))
            rows.append(("vre_family", model, "image", family, 0.0, 1.0))
    iv = pl.DataFrame(
        rows, schema=["metric", "model", "modality", "perturbation", "low", "high"], orient="row"
    )
    con.register("iv", iv.to_arrow())
    con.execute("CREATE TABLE intervals AS SELECT * FROM iv")
    return con


def test_the_sentences_are_true_of_the_table():
    table = _vre_family(_database(True))
    assert table.height == 6 and table["relative_drop_low"].null_count() == 0
    sentences = family_sentences(table)
    assert len(sentences) == 2  # c has one family: no comparison
    for sentence in sentences:
        model = sentence.split(":")[0]
        rows = table.filter(pl.col("model") == model)
        top = rows.sort("relative_drop", descending=True).row(0, named=True)
        assert f"the {top['family']} perturbations cost the most" in sentence
        assert (
            f"relative drop {top['relative_drop']:.3f} [{top['relative_drop_low']:.3f}, "
            f"{top['relative_drop_high']:.3f}]" in sentence
        )
        others = rows.filter(pl.col("family") != top["family"])
        overlap = int((others["relative_drop_high"] >= top["relative_drop_low"]).sum())
        if overlap:
            assert f"overlaps {overlap} of the other {others.height} families'" in sentence
        else:
            assert f"above every other family's ({others.height})" in sentence
    assert "geometric" in sentences[0] and "above every other" in sentences[0]
    assert "noise" in sentences[1] and "overlaps 1 of the other 1" in sentences[1]


def test_without_intervals_the_sentence_says_so():
    table = _vre_family(_database(False))
    assert table["relative_drop_low"].null_count() == table.height
    assert family_sentences(table)[0] == (
        "a: the geometric perturbations cost the most (relative drop 0.350; no intervals in "
        "this run)."
    )


def test_a_database_written_before_the_table_shows_none():
    con = duckdb.connect()
    assert _vre_family(con).height == 0

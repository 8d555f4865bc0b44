"""The report page is rendered from Jinja2 templates (package data): autoescaped, one
block per registered section, each section a partial without SQL, every registered
analysis shown by a section, and a section without data is left out."""

import re
from pathlib import Path

import duckdb
import jinja2
import polars as pl
import pytest

import vqarobust.report
from vqarobust.analyses.registry import ANALYSES
from vqarobust.report import render_report
from vqarobust.report.html import cells, page_template
from vqarobust.report.sections import SECTIONS, Section

TEMPLATES = Path(vqarobust.report.__file__).parent / "templates"


def test_one_block_per_section_in_registry_order():
    names = [s.name for s in SECTIONS]
    assert names == [
        "summary",
        "settings",
        "figures",
        "calibration",
        "attention",
        "uncertainty",
        "questions",
        "context",
        "failures",
        "tables",
        "plugins",
        "costs",
        "warnings",
        "provenance",
    ]
    assert list(page_template().blocks) == names
    page = (TEMPLATES / "report.html.j2").read_text()
    for s in SECTIONS:
        assert f'{{% block {s.name} %}}{{% include "{s.template}" %}}{{% endblock %}}' in page
        assert (TEMPLATES / s.template).is_file()
    assert sorted(p.name for p in (TEMPLATES / "sections").iterdir()) == sorted(
        f"{n}.html.j2" for n in names
    )


def test_no_sql_outside_the_sections_reads():
    sql = re.compile(r"\b(SELECT|PIVOT|FROM)\b")
    for path in TEMPLATES.rglob("*.j2"):
        assert not sql.search(path.read_text()), path
    # The page itself only loops over the sections.
    assert not sql.search((TEMPLATES.parent / "html.py").read_text())


def test_every_registered_analysis_is_shown_by_a_section():
    shown = {name for s in SECTIONS for name in s.analyses}
    assert shown <= set(ANALYSES), shown - set(ANALYSES)
    assert set(ANALYSES) <= shown, set(ANALYSES) - shown


def test_the_sections_make_exactly_the_declared_files(database, tmp_path):
    import matplotlib.pyplot as plt

    db, _, _ = database
    extra = Section(
        "extra", (), lambda data, run: None, figures=lambda data, run: {"surprise": plt.figure()}
    )
    with pytest.raises(RuntimeError, match=r"make figures \['surprise'\] that report.outputs"):
        render_report(db, tmp_path / "a" / "index.html", sections=(*SECTIONS, extra))
    twice = Section(
        "twice", (), lambda data, run: None, tables=lambda data: {"accuracy": pl.DataFrame()}
    )
    with pytest.raises(RuntimeError, match=r"two report sections make the table \['accuracy'\]"):
        render_report(db, tmp_path / "b" / "index.html", sections=(*SECTIONS, twice))
    without = tuple(s for s in SECTIONS if s.name != "attention")
    with pytest.raises(RuntimeError, match=r"and not \['attention_shift'\]"):
        render_report(db, tmp_path / "c" / "index.html", sections=without)


def test_cells_format_numbers_text_and_gaps():
    df = pl.DataFrame({"m": ["a<b>", None], "x": [0.12345, None], "n": [3, 4], "ok": [True, False]})
    assert cells(df, 2) == [
        [("a<b>", "text"), ("0.12", "number"), ("3", "number"), ("True", "text")],
        [("", "empty"), ("", "empty"), ("4", "number"), ("False", "text")],
    ]


def test_text_from_the_database_is_escaped(database, tmp_path):
    db, _, _ = database
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE predictions SET model = '<script>x</script>' WHERE model = 'bad'")
        con.execute("UPDATE vre_model SET model = '<script>x</script>' WHERE model = 'bad'")
        con.execute(
            "UPDATE run_info SET value = '[\"<b>careful</b> & more\"]' WHERE key = 'warnings'"
        )
    text = render_report(db, tmp_path / "r" / "index.html").read_text()
    assert "<script>" not in text and "&lt;script&gt;x&lt;/script&gt;" in text
    assert "<li>&lt;b&gt;careful&lt;/b&gt; &amp; more</li>" in text


def test_sections_without_data_are_left_out(database, tmp_path):
    db, _, _ = database
    text = render_report(db, tmp_path / "r" / "index.html").read_text()
    # This database has image corruptions only: no swaps, question perturbations,
    # attention maps or quality scores.
    for gone in ("context", "questions", "attention", "calibration"):
        assert f'<section id="{gone}">' not in text
    for kept in ("summary", "figures", "uncertainty", "failures", "tables", "provenance"):
        assert f'<section id="{kept}">' in text
    assert "No context swaps" not in text and "Swaps that changed" not in text
    # Their figure files are still written (the workflow declares them).
    assert (tmp_path / "r" / "figures" / "context_reliance.png").exists()


def test_a_page_of_ones_own_extends_the_template(database, tmp_path):
    db, _, _ = database
    mine = tmp_path / "mine.html.j2"
    mine.write_text(
        '{% extends "report.html.j2" %}{% block summary %}<section id="summary">'
        "<p>{{ summary.models.height }} models</p></section>{% endblock %}"
        "{% block figures %}{% endblock %}"
    )
    text = render_report(db, tmp_path / "r" / "index.html", template=mine).read_text()
    assert '<section id="summary"><p>2 models</p></section>' in text
    assert '<section id="figures">' not in text and '<section id="tables">' in text
    mine.write_text('{% extends "report.html.j2" %}{% block summary %}{{ nope }}{% endblock %}')
    with pytest.raises(jinja2.UndefinedError, match="nope"):  # no silent gap
        render_report(db, tmp_path / "r" / "index.html", template=mine)


def test_each_summary_field_is_read_by_one_section(database):
    """`vqarobust summary` is the sections' `summary` readers put together: every field of
    Summary comes from exactly one section, and the readers give no other key."""
    import dataclasses

    from vqarobust.summary import Summary

    db, _, n_questions = database
    owners: dict[str, list[str]] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        for section in SECTIONS:
            for key in section.summary(con):
                owners.setdefault(key, []).append(section.name)
    assert set(owners) == {f.name for f in dataclasses.fields(Summary)}
    assert {k: v for k, v in owners.items() if len(v) > 1} == {}
    assert owners["models"] == ["summary"] and owners["weakest_types"] == ["figures"]
    assert owners["context_k"] == ["context"] and owners["rscore"] == ["questions"]
    with duckdb.connect(str(db), read_only=True) as con:
        n = SECTIONS[0].summary(con)["n_questions"]
    assert n == n_questions


def test_the_provenance_table_prints_no_raw_python_or_json():
    from types import SimpleNamespace

    from vqarobust.report.sections.provenance import context, readable

    assert readable("[]") == "none" and readable("null") == "none"
    assert readable('{"torch": "2.14.1", "plugins": []}') == "torch: 2.14.1; plugins: none"
    assert readable('[{"module": "my_plugin", "sha256": "ab"}]') == "module: my_plugin; sha256: ab"
    assert readable("3aaaab5d") == "3aaaab5d" and readable("true") == "yes"
    run = SimpleNamespace(info={"provenance.plugins": "[]", "other": "[]"})
    assert context({}, run).rows() == [("plugins", "none")]

import duckdb
import polars as pl
import pytest

from tests.predictions import write_predictions
from vqarobust import store
from vqarobust.db import DatabaseInputs, build_database
from vqarobust.report import render_report

TABLES = {
    "questions",
    "predictions",
    "accuracy",
    "question_type_accuracy",
    "submetrics",
    "vre_model",
    "vre_perturbation",
    "vre_sweep",
    "run_info",
}


def test_database_has_every_table_with_consistent_numbers(database):
    db, counts, n_questions = database
    assert set(counts) >= TABLES
    assert counts["predictions"] == n_questions * 2 * 11
    with duckdb.connect(str(db), read_only=True) as con:
        acc = con.sql("SELECT * FROM accuracy").pl()
        assert acc.height == 2 * 11 and (acc["n"] == n_questions).all()
        clean = acc.filter(pl.col("perturbation") == "clean")["accuracy"].to_list()
        expected = round(0.9 * n_questions) / n_questions
        assert clean == pytest.approx([expected, expected])
        vre = dict(con.execute("SELECT model, vre FROM vre_model").fetchall())
        assert vre["good"] < vre["bad"]
        fam = dict(con.execute("SELECT DISTINCT perturbation, family FROM submetrics").fetchall())
        view = con.execute("SELECT DISTINCT perturbation FROM image_accuracy").fetchall()
        assert {c for (c,) in view} == {"clean", "snow", "blur"}
        assert fam == {"snow": "weather", "blur": "blur"}
        qt = con.sql("SELECT sum(n) AS n FROM question_type_accuracy").pl()["n"][0]
        assert qt == counts["predictions"]


def test_duplicate_predictions_are_rejected(tmp_path, easy_vqa_eval):
    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    p = write_predictions(tmp_path, questions, "m", "clean", [0], lambda s: 1.0)
    with pytest.raises(ValueError, match="duplicated predictions"):
        build_database(tmp_path / "x.duckdb", DatabaseInputs(easy_vqa_eval["questions"], [p, p]))
    assert not (tmp_path / "x.duckdb").exists()


def test_report_is_self_contained(database, tmp_path):
    db, _, _ = database
    out = render_report(db, tmp_path / "report" / "index.html")
    text = out.read_text()
    assert "VRE per model" in text and "data:image/png;base64," in text
    assert 'src="http' not in text and "<script" not in text
    for name in ("relative_drop", "error_vs_severity", "average_error"):
        assert (tmp_path / "report" / "figures" / f"{name}.png").stat().st_size > 1000
    assert (tmp_path / "report" / "tables" / "vre_model.csv").exists()


def test_sample_questions_are_seeded_per_question_and_on_distinct_images(easy_vqa_eval):
    from vqarobust.samples import sample_questions

    questions = pl.from_arrow(store.read_questions(easy_vqa_eval["questions"]))
    picked = sample_questions(questions, seed=0)
    assert picked.height == 3 and picked["image_id"].n_unique() == 3
    shuffled = questions.sample(fraction=1.0, shuffle=True, seed=1)
    assert sample_questions(shuffled, seed=0)["question_id"].to_list() == (
        picked["question_id"].to_list()
    )
    assert sample_questions(questions, seed=1)["question_id"].to_list() != (
        picked["question_id"].to_list()
    )


def test_answer_grid_from_sample_thumbnails(tmp_path, easy_vqa_eval):
    from vqarobust.materialize.images import corrupt_subset
    from vqarobust.samples import THUMBNAIL

    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    paths = [
        write_predictions(tmp_path, questions, "m", "clean", [0], lambda s: 0.9),
        write_predictions(tmp_path, questions, "m", "snow", [1, 2], lambda s: 0.5),
    ]
    subsets = [("clean", 0, str(easy_vqa_eval["images"]))]
    for s in (1, 2):
        corrupt_subset(easy_vqa_eval["images"], tmp_path / f"snow{s}", "snow", s)
        subsets.append(("snow", s, str(tmp_path / f"snow{s}")))
    db = tmp_path / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths, image_subsets=subsets),
        families={"snow": "weather"},
    )
    with duckdb.connect(str(db), read_only=True) as con:
        thumbs = con.sql("SELECT * FROM sample_images").pl()
    assert thumbs.height == 3 * 3  # sample questions x (clean + 2 severities)
    import io

    from PIL import Image

    for png in thumbs["png"]:
        with Image.open(io.BytesIO(png)) as im:
            assert max(im.size) == min(THUMBNAIL, 64)  # easy-VQA images are 64x64
    render_report(db, tmp_path / "report" / "index.html")
    with Image.open(tmp_path / "report" / "figures" / "answer_grid_1.png") as grid:
        # Two rows (clean, snow) of images with answers under them, two severity columns.
        assert grid.size[0] > 300 and grid.size[1] > 300
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Sample question 3" in html


def test_answer_flips_are_counted_per_modality(database):
    from vqarobust.report.sections.failures import answer_flips

    db, _, n_questions = database
    with duckdb.connect(str(db), read_only=True) as con:
        flips = answer_flips(con)
        # Hand count: a question flips where it is right clean (share 0.9) and wrong at the
        # severity; summed over snow and blur, severities 1-5, for model "good".
        right = {s: round((0.9 - 0.05 * s) * n_questions) for s in range(1, 6)}
        expected = 2 * sum(round(0.9 * n_questions) - right[s] for s in range(1, 6))
    good = flips.filter(pl.col("model") == "good")
    assert set(flips["modality"]) == {"image"}
    assert good["n"].sum() == expected


def test_question_types_by_perturbation_pool_severities_and_average_models(database, monkeypatch):
    from vqarobust.report.sections import figures
    from vqarobust.summary import summarize

    # The tiny set has few questions per type: let every type with 5 or more count.
    monkeypatch.setattr(figures, "MIN_TYPE_QUESTIONS", 5)
    MIN_TYPE_QUESTIONS = 5
    db, _, _ = database
    with duckdb.connect(str(db), read_only=True) as con:
        table = con.sql("SELECT * FROM question_type_perturbation").pl()
        per_sev = con.sql("SELECT * FROM question_type_accuracy WHERE severity > 0").pl()
        sizes = con.sql("SELECT question_type, count(*) AS n FROM questions GROUP BY ALL").pl()
    pooled = per_sev.group_by("model", "perturbation", "question_type").agg(
        ((pl.col("accuracy") * pl.col("n")).sum() / pl.col("n").sum()).alias("expected")
    )
    got = table.join(pooled, on=["model", "perturbation", "question_type"])
    assert got.height == pooled.height
    assert (got["accuracy"] - got["expected"]).abs().max() < 1e-12
    mean = pooled.group_by("perturbation", "question_type").agg(pl.col("expected").mean())
    got = table.filter(pl.col("model") == "(mean)").join(mean, on=["perturbation", "question_type"])
    assert got.height == mean.height and (got["accuracy"] - got["expected"]).abs().max() < 1e-12
    # The summary's weakest type per corruption, recomputed.
    big = sizes.filter(pl.col("n") >= MIN_TYPE_QUESTIONS)["question_type"].to_list()
    expect = (
        mean.filter(pl.col("question_type").is_in(big))
        .sort("expected", "question_type")
        .group_by("perturbation", maintain_order=True)
        .first()
        .sort("perturbation")
    )
    weakest = summarize(db).weakest_types
    assert weakest.height == 2  # snow and blur each name a type
    assert weakest["perturbation"].to_list() == expect["perturbation"].to_list()
    assert weakest["question_type"].to_list() == expect["question_type"].to_list()


def test_the_report_shows_misprediction_shares_that_sum_to_one(database):
    from vqarobust.report.sections.failures import mispredictions

    db, _, _ = database
    with duckdb.connect(str(db), read_only=True) as con:
        kinds, examples = mispredictions(con)
        counts = con.sql(
            "SELECT model, modality, sum(n) AS n FROM mispredictions GROUP BY ALL ORDER BY ALL"
        ).pl()
    shares = kinds.drop("model", "modality", "mispredictions")
    assert all(dtype == pl.Float64 for dtype in shares.dtypes)
    assert (shares.sum_horizontal() - 1.0).abs().max() < 1e-12
    assert kinds["mispredictions"].to_list() == [int(n) for n in counts["n"]]

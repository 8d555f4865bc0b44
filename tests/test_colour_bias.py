import duckdb
import polars as pl
import pytest

from vqarobust import store
from vqarobust.metrics.colour_bias import (
    colour_bias_table,
    colour_questions,
    colour_rows,
)

QUESTIONS = pl.DataFrame(
    {
        "question_id": [1, 2, 3, 4, 5],
        "image_id": [10, 10, 11, 12, 13],
        "question": [
            "what color is the circle?",
            "is there a square?",
            "what color is it?",
            "what colour is the bus?",
            "how many dogs?",
        ],
        # 4: "Red" x2 vs "blue" x1 -> red after normalization; 5: numbers are no colour.
        "answers": [
            ["red"] * 10,
            ["yes"] * 10,
            ["gray"] * 10,
            ["Red", "Red", "blue"],
            ["2"] * 10,
        ],
        "question_type": [
            "what color is the",
            "is there a",
            "what color is",
            "what color is",
            "how many",
        ],
        "answer_type": ["other", "yes/no", "other", "other", "number"],
    }
)


def _scored(rows):
    return pl.DataFrame(
        rows,
        schema=["model", "modality", "perturbation", "severity", "question_id", "answer", "score"],
        orient="row",
    )


def test_colour_questions_by_their_most_frequent_answer():
    got = colour_questions(QUESTIONS).sort("question_id")
    assert got.rows() == [(1, "red"), (3, "gray"), (4, "red")]


def test_colour_bias_hand_computed():
    scored = _scored(
        [
            # model m: clean answers name colours; on grayscale it says blue (chromatic),
            # gray (a grey) and "circle" (no colour).
            ("m", "clean", "clean", 0, 1, "red", 1.0),
            ("m", "clean", "clean", 0, 3, "gray", 1.0),
            ("m", "clean", "clean", 0, 4, "Red", 1.0),
            ("m", "clean", "clean", 0, 2, "yes", 1.0),
            ("m", "image", "grayscale", 1, 1, "Blue", 0.0),
            ("m", "image", "grayscale", 1, 3, "gray", 1.0),
            ("m", "image", "grayscale", 1, 4, "circle", 0.0),
            ("m", "image", "grayscale", 1, 2, "no", 0.0),  # not a colour question
            ("m", "image", "snow", 1, 1, "green", 0.0),  # another corruption: ignored
        ]
    )
    rows = colour_rows(scored, QUESTIONS, "grayscale")
    assert sorted(rows["question_id"]) == [1, 3, 4]
    assert dict(rows.select("question_id", "class").rows()) == {
        1: "chromatic",
        3: "grey",
        4: "non_colour",
    }
    t = colour_bias_table(rows).row(0, named=True)
    assert t["n_colour_questions"] == 3
    assert t["chromatic_share"] == pytest.approx(1 / 3)
    assert t["grey_share"] == pytest.approx(1 / 3)
    assert t["non_colour_share"] == pytest.approx(1 / 3)
    # clean: red, gray, red -> two chromatic of three
    assert t["clean_chromatic_share"] == pytest.approx(2 / 3)
    assert t["accuracy"] == pytest.approx(1 / 3) and t["clean_accuracy"] == 1.0
    # Each share's interval over the images: around the share, within [0, 1].
    for share in ("chromatic_share", "grey_share", "non_colour_share", "clean_chromatic_share"):
        assert 0.0 <= t[f"{share}_low"] <= t[share] <= t[f"{share}_high"] <= 1.0


def test_without_grayscale_predictions_the_tables_are_empty():
    scored = _scored([("m", "clean", "clean", 0, 1, "red", 1.0)])
    assert colour_rows(scored, QUESTIONS, "grayscale").is_empty()
    assert colour_bias_table(colour_rows(scored, QUESTIONS, "grayscale")).is_empty()


def test_grayscale_stays_out_of_vre_unless_asked(easy_vqa_eval, tmp_path):
    from tests.predictions import write_predictions
    from vqarobust.db import DatabaseInputs, build_database
    from vqarobust.materialize.images import corrupt_subset
    from vqarobust.report import render_report

    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    paths = [
        write_predictions(tmp_path, questions, "m", "clean", [0], lambda s: 0.9),
        write_predictions(tmp_path, questions, "m", "snow", [1, 2, 3], lambda s: 0.8),
        write_predictions(tmp_path, questions, "m", "grayscale", [1], lambda s: 0.3),
    ]
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "grey", "grayscale", 1)
    subsets = [("clean", 0, str(easy_vqa_eval["images"])), ("grayscale", 1, str(tmp_path / "grey"))]
    families = {"snow": "weather", "grayscale": "colour"}
    out = {}
    for include in (False, True):
        db = tmp_path / f"{include}.duckdb"
        outside = [] if include else ["grayscale"]
        build_database(
            db,
            DatabaseInputs(easy_vqa_eval["questions"], paths, image_subsets=subsets),
            families=families,
            outside_metrics=outside,
        )
        with duckdb.connect(str(db), read_only=True) as con:

            def names(sql, con=con):
                return {p for (p,) in con.execute(sql).fetchall()}

            out[include] = {
                "vre": names("SELECT perturbation FROM vre_perturbation"),
                "mmi": con.execute(
                    "SELECT perturbed FROM mmi WHERE modality = 'image' AND scope = 'all'"
                ).fetchone()[0],
                "acc": names("SELECT perturbation FROM accuracy"),
                "iv": names("SELECT perturbation FROM intervals WHERE metric = 'accuracy'"),
                "bias": con.sql("SELECT * FROM colour_bias").pl(),
                "examples": con.sql("SELECT * FROM colour_bias_examples").pl(),
            }
        if not include:
            text = render_report(db, tmp_path / "report" / "index.html").read_text()
            assert "Colour bias on grayscale images" in text
            assert "Grayscale is kept out of VRE" in text
    assert out[False]["vre"] == {"snow"} and out[True]["vre"] == {"snow", "grayscale"}
    assert "grayscale" in out[False]["acc"] and "grayscale" not in out[False]["iv"]
    # MMI's perturbed accuracy: snow alone, or the mean of snow's and grayscale's.
    clean_like = round(0.8 * len(questions)) / len(questions)
    grey = round(0.3 * len(questions)) / len(questions)
    assert out[False]["mmi"] == pytest.approx(clean_like)
    assert out[True]["mmi"] == pytest.approx((clean_like + grey) / 2)
    bias = out[False]["bias"]
    # easy-VQA's colour questions: the wrong answers are "wrong", right ones the label.
    n_colour = sum(
        q["answers"][0] in {"red", "green", "blue", "yellow", "teal", "brown", "black", "gray"}
        for q in questions
    )
    assert bias["n_colour_questions"].to_list() == [n_colour]
    assert out[False]["examples"]["png"].null_count() == 0

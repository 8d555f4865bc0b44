"""The misprediction rules on hand-written answer pairs, and the table built from them."""

import polars as pl
import pytest

from vqarobust.metrics.mispredictions import (
    KINDS,
    answer_vocabulary,
    classify,
    misprediction_rows,
    misprediction_table,
)

# (clean answer, perturbed answer, question type, expected kind)
PAIRS = [
    ("yes", "no", "is there a", "yes_no_flip"),
    ("no", "yes", "is the", "yes_no_flip"),
    ("Yes", "No.", "does the", "yes_no_flip"),  # normalized first
    ("circle", "nothing", "what shape is", "blindness"),
    ("red", "none", "what color is the", "blindness"),
    ("3", "0", "how many", "blindness"),  # "0" where something was counted
    ("dog", "", "what is the", "blindness"),
    ("car", "no", "what is the", "blindness"),
    ("two", "zero", "how many", "blindness"),  # number words are digits after normalizing
    ("red", "blue", "what color is the", "miscolour"),
    ("Green", "grey", "what color is the", "miscolour"),
    ("white", "black", "what color", "miscolour"),
    ("yellow", "orange", "what color is the", "miscolour"),
    ("pink", "purple", "what color are the", "miscolour"),
    ("3", "2", "how many", "miscount_under"),
    ("three", "1", "how many", "miscount_under"),
    ("10", "9", "how many", "miscount_under"),
    ("2", "4", "how many", "miscount_over"),
    ("one", "two", "how many", "miscount_over"),
    ("5", "12", "how many", "miscount_over"),
    ("circle", "triangle", "what shape is", "misclassification"),
    ("rectangle", "circle", "what shape is", "misclassification"),
    ("cat", "dog", "what animal is", "misclassification"),
    ("circle", "blue", "what shape is", "other"),  # a colour for a shape: wrong kind
    ("red", "circle", "what color is the", "other"),
    ("cat", "pizza", "what animal is", "other"),  # not in the animal answers
    ("3", "red", "how many", "other"),
    ("yes", "red", "is there a", "other"),
    ("no", "circle", "is there a", "other"),
    ("circle", "yes", "what shape is", "other"),
    ("nothing", "none", "what is the", "other"),  # clean named nothing either
    ("red", "red blue", "what color is the", "other"),
    ("2", "two cats", "how many", "other"),
]

VOCABULARY = pl.DataFrame(
    [("what shape is", a) for a in ("circle", "triangle", "rectangle")]
    + [("what animal is", a) for a in ("cat", "dog", "horse")]
    + [("what color is the", a) for a in ("red", "blue", "green")],
    schema=["question_type", "answer"],
    orient="row",
)


def test_at_least_thirty_hand_written_pairs_get_their_kind():
    assert len(PAIRS) >= 30
    pairs = pl.DataFrame(
        [p[:3] for p in PAIRS], schema=["clean", "perturbed", "question_type"], orient="row"
    )
    got = classify(pairs, VOCABULARY).to_list()
    wrong = [(p, g) for p, g in zip(PAIRS, got, strict=True) if p[3] != g]
    assert not wrong
    assert set(got) == set(KINDS)  # every kind exercised


def test_without_a_vocabulary_nothing_is_a_misclassification():
    pairs = pl.DataFrame({"clean": ["circle"], "perturbed": ["triangle"]})
    assert classify(pairs).to_list() == ["other"]


def test_the_table_counts_clean_correct_perturbed_wrong_answers_only():
    questions = pl.DataFrame(
        {
            "question_id": [1, 2, 3],
            "question_type": ["what color is the", "how many", "is there a"],
            "answers": [["red"] * 10, ["3"] * 10, ["yes"] * 10],
        }
    )
    rows = [  # model, modality, perturbation, severity, question_id, answer, score
        ("m", "clean", "clean", 0, 1, "red", 1.0),
        ("m", "clean", "clean", 0, 2, "3", 1.0),
        ("m", "clean", "clean", 0, 3, "no", 0.0),  # wrong on clean: never counted
        ("m", "image", "snow", 1, 1, "blue", 0.0),
        ("m", "image", "snow", 1, 2, "5", 0.0),
        ("m", "image", "snow", 1, 3, "yes", 1.0),
        ("m", "image", "snow", 2, 1, "red", 1.0),  # still right: no misprediction
        ("m", "image", "snow", 2, 2, "0", 0.0),
        ("m", "context", "swap_class", 1, 1, "blue", 0.0),  # context has its own tables
    ]
    columns = ["model", "modality", "perturbation", "severity", "question_id", "answer", "score"]
    scored = pl.DataFrame(rows, schema=columns, orient="row")
    detail = misprediction_rows(scored, questions)
    assert detail.select("severity", "question_id", "kind").rows() == [
        (1, 1, "miscolour"),
        (1, 2, "miscount_over"),
        (2, 2, "blindness"),
    ]
    table = misprediction_table(detail)
    assert table.height == 2 * len(KINDS)
    sev1 = table.filter(pl.col("severity") == 1)
    assert dict(sev1.select("kind", "n").iter_rows())["miscolour"] == 1
    assert sev1["share"].sum() == pytest.approx(1.0)
    assert (
        table.filter((pl.col("severity") == 2) & (pl.col("kind") == "blindness"))["share"].item()
        == 1.0
    )


def test_the_vocabulary_is_every_normalized_human_answer_per_type():
    q = pl.DataFrame(
        {"question_type": ["how many", "how many"], "answers": [["Two", "2"], ["three"]]}
    )
    vocab = answer_vocabulary(q).sort("answer")
    assert vocab.rows() == [("how many", "2"), ("how many", "3")]


def test_examples_are_seeded_with_thumbnails_of_the_clean_and_the_seen_image(
    easy_vqa_eval, tmp_path
):
    import base64
    import io

    from PIL import Image

    from vqarobust import store
    from vqarobust.materialize.images import corrupt_subset
    from vqarobust.metrics.mispredictions import N_EXAMPLES, misprediction_examples
    from vqarobust.report.sections.failures import examples_context

    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow1", "snow", 1)
    questions = pl.from_arrow(store.read_questions(easy_vqa_eval["questions"]))
    truth = questions.select("question_id", pl.col("answers").list.first().alias("a"))
    rows = [("m", "clean", "clean", 0, q, a, 1.0) for q, a in truth.iter_rows()]
    rows += [
        ("m", "image", "snow", 1, q, "yes" if a == "no" else "no", 0.0)
        for q, a in truth.iter_rows()
    ]
    columns = ["model", "modality", "perturbation", "severity", "question_id", "answer", "score"]
    scored = pl.DataFrame(rows, schema=columns, orient="row")
    wrong = misprediction_rows(scored, questions)
    folders = {("clean", 0): easy_vqa_eval["images"], ("snow", 1): tmp_path / "snow1"}
    first = misprediction_examples(wrong, questions, folders, seed=0)
    again = misprediction_examples(wrong.reverse(), questions, folders, seed=0)
    assert first.equals(again)  # the choice does not depend on row order
    assert first.group_by("kind").len()["len"].max() <= N_EXAMPLES
    assert set(first["kind"]) <= set(KINDS) and first.height >= 2
    for png in (*first["clean_png"], *first["perturbed_png"]):
        assert max(Image.open(io.BytesIO(png)).size) <= 112
    assert (first["clean_png"] != first["perturbed_png"]).all()  # snow changed the image
    shown = examples_context(first)
    assert [label for e in shown for label, _ in e["images"]] == ["clean", "seen"] * first.height
    assert base64.b64decode(shown[0]["images"][1][1]) == first["perturbed_png"][0]

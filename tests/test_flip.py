"""The horizontal flip's question marking (vqarobust.metrics.flip) on hand-written
questions, and how scoring treats the marked questions under each policy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from vqarobust import store
from vqarobust.analyses.base import Inputs, RunOptions
from vqarobust.analyses.scoring import Settings, run
from vqarobust.corruptions import corrupt, max_severity
from vqarobust.corruptions.samples import photo_like
from vqarobust.metrics import flip

# question, answers, the kind a flip gives it (None: unchanged)
HAND_WRITTEN = [
    ("Which side of the road is the car on?", ["left", "left", "left side"], "answer"),
    ("Where is the dog?", ["on the right", "on the right", "right"], "answer"),
    ("Which hand is he holding the bat with?", ["left hand", "left hand", "lefthand"], "answer"),
    ("What is on the left of the plate?", ["fork"], "question"),
    ("Is the cup to the right of the laptop?", ["yes"], "question"),
    ("Is the man on the LEFT wearing a hat?", ["no"], "question"),
    ("Is this the right way to hold a racket?", ["yes"], "question"),  # 'correct': marked
    ("Which way does the arrow on the right point?", ["left"], "question"),
    ("What does the sign say?", ["stop"], "text"),
    ("What is written on the bus?", ["express"], "text"),
    ("What number is on the jersey?", ["23"], "text"),
    ("What time is it?", ["noon"], "text"),
    ("What brand is the laptop on the left?", ["apple"], "text"),
    ("What color is the bus?", ["red"], None),
    ("How many people are there?", ["3"], None),
    ("Is the light bright?", ["yes"], None),  # 'bright' is not 'right'
    ("What is the leftover food?", ["pizza"], None),  # nor 'leftover' 'left'
    ("What number of players are there?", ["11"], None),
    ("Which is the rightmost dog?", ["brown"], "question"),
    ("Which way does the wheel turn?", ["clockwise"], "question"),  # only sides are swapped
    ("What is the bus number?", ["12"], "text"),
    ("What is the player's number?", ["7"], "text"),
    ("What is the name of the store?", ["gap"], "text"),
    ("What is the time?", ["noon"], "text"),
    ("What is the name of the dog?", ["rex"], None),
    ("Which plate is fuller?", ["The Left one", "the left one", "left"], "answer"),
]


def _questions() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question_id": list(range(1, len(HAND_WRITTEN) + 1)),
            "image_id": [10] * len(HAND_WRITTEN),
            "question": [q for q, _, _ in HAND_WRITTEN],
            "answers": [a for _, a, _ in HAND_WRITTEN],
            "question_type": ["what"] * len(HAND_WRITTEN),
            "answer_type": ["other"] * len(HAND_WRITTEN),
        }
    )


def test_marking_hand_written_questions():
    marks = flip.mark(_questions())
    got = dict(zip(marks["question_id"], marks["kind"], strict=True))
    expected = {i: k for i, (_, _, k) in enumerate(HAND_WRITTEN, 1) if k is not None}
    assert got == expected


def test_swapped_answers_swap_whole_words_only():
    q = _questions()
    out = flip.flipped_answers(q, [1, 2, 3, 16, 26])
    answers = dict(zip(out["question_id"], out["answers"].to_list(), strict=True))
    assert answers[1] == ["right", "right", "right side"]
    assert answers[2] == ["on the left", "on the left", "left"]
    assert answers[3] == ["right hand", "right hand", "righthand"]
    assert answers[16] == ["yes"]
    assert answers[26] == ["The Right one", "the right one", "right"]  # case kept
    assert answers[4] == ["fork"]  # not chosen: unchanged
    assert out.height == q.height and out["question_id"].to_list() == q["question_id"].to_list()


def test_policies_say_what_is_left_out():
    marks = flip.mark(_questions())
    assert set(flip.left_out(marks, "leave_out")["question_id"]) == set(marks["question_id"])
    assert set(flip.left_out(marks, "flip_answers")["kind"]) == {"question", "text"}
    with pytest.raises(ValueError, match="flip_questions must be one of flip_answers, leave_out"):
        flip.left_out(marks, "ignore")


def test_the_flip_corruption_mirrors_the_image():
    image = photo_like(40, 56, 0)
    assert max_severity("horizontal_flip") == 1
    assert np.array_equal(corrupt(image, "horizontal_flip", 1, seed=4), image[:, ::-1])


def _inputs(tmp_path, questions: pl.DataFrame, predictions: pl.DataFrame) -> Inputs:
    store.write_table(questions.to_arrow().cast(store.QUESTION_SCHEMA), tmp_path / "q.parquet")
    table = pa.Table.from_pylist(predictions.to_dicts(), schema=store.PREDICTION_SCHEMA)
    store.write_table(table, tmp_path / "p.parquet")
    files = {"questions": [tmp_path / "q.parquet"], "predictions": [tmp_path / "p.parquet"]}
    return Inputs(files, lambda name: pl.DataFrame())


def _predictions(answers_clean: list[str], answers_flip: list[str]) -> pl.DataFrame:
    n = len(answers_clean)
    rows = [(i + 1, a, "clean", "clean", 0) for i, a in enumerate(answers_clean)]
    rows += [(i + 1, a, "image", "horizontal_flip", 1) for i, a in enumerate(answers_flip)]
    assert len(answers_flip) == n
    return pl.DataFrame(
        [
            {
                "question_id": q,
                "answer": a,
                "model": "m",
                "modality": m,
                "perturbation": p,
                "severity": s,
                "truncated": False,
            }
            for q, a, m, p, s in rows
        ]
    )


@pytest.mark.parametrize("policy", ["flip_answers", "leave_out"])
def test_scoring_rescores_or_leaves_out_the_marked_questions(tmp_path, policy):
    questions = _questions()
    truth = [a[0] for _, a, _ in HAND_WRITTEN]
    # On the flipped images the model answers as the flip makes right: the other side.
    on_flip = [
        {1: "right", 2: "on the left", 3: "right hand", 26: "The Right one"}.get(i, a)
        for i, a in enumerate(truth, 1)
    ]
    result = run(
        _inputs(tmp_path, questions, _predictions(truth, on_flip)),
        Settings("exact_match", {}, policy),
    )
    marks = result.tables["flip_marks"].frame
    predictions = result.tables["predictions"].frame
    left = set(marks.filter(pl.col("treatment") == "left_out")["question_id"])
    kinds = dict(zip(marks["question_id"], marks["kind"], strict=True))
    if policy == "flip_answers":
        assert left == {i for i, k in kinds.items() if k != "answer"}
        assert set(marks.filter(pl.col("treatment") == "scored_flipped")["question_id"]) == {
            1,
            2,
            3,
            26,
        }
    else:
        assert left == set(kinds)
    # Left-out questions leave every table, the clean subset's too (paired subsets).
    assert not set(predictions["question_id"]) & left
    every = set(range(1, len(HAND_WRITTEN) + 1))
    assert set(result.tables["questions"].frame["question_id"]) == every - left
    flipped = predictions.filter(pl.col("perturbation") == "horizontal_flip")
    # Every remaining answer on the flipped images is right: questions 1-3 against the
    # swapped answers, the unmarked ones against their own.
    assert flipped["score"].to_list() == [1.0] * flipped.height
    assert predictions.filter(pl.col("perturbation") == "clean")["score"].min() == 1.0
    # The run's warning (shown in the report's Warnings section) is true of the table.
    scored = marks.height - len(left)
    assert (
        f"of the {marks.height} questions a flip changes, {scored} are scored against "
        f"their swapped answers on the flipped images and {len(left)} are left out of "
        "every table (table flip_marks)"
    ) in " ".join(result.warnings)


def test_without_a_flip_subset_nothing_is_marked(tmp_path):
    questions = _questions()
    truth = [a[0] for _, a, _ in HAND_WRITTEN]
    preds = _predictions(truth, truth).filter(pl.col("perturbation") == "clean")
    result = run(_inputs(tmp_path, questions, preds), Settings("exact_match", {}))
    assert result.tables["flip_marks"].frame.height == 0
    assert result.tables["questions"].frame.height == len(HAND_WRITTEN)
    assert Settings.from_options(RunOptions(flip_questions="leave_out")).flip_questions == (
        "leave_out"
    )


def test_with_vqa_accuracy_the_swapped_answers_keep_their_case(tmp_path):
    """The official metric does not lower-case its reference answers: a swapped answer
    keeps its case, so a flipped-image answer scores as the clean one does."""
    questions = _questions()
    truth = [a[0] for _, a, _ in HAND_WRITTEN]
    on_flip = [
        {1: "right", 2: "on the left", 3: "right hand", 26: "The Right one"}.get(i, a)
        for i, a in enumerate(truth, 1)
    ]
    result = run(
        _inputs(tmp_path, questions, _predictions(truth, on_flip)),
        Settings("vqa_accuracy", {}, "flip_answers"),
    )
    scores = result.tables["predictions"].frame.filter(pl.col("question_id").is_in([1, 26]))
    by = {(p, q): s for p, q, s in scores.select("perturbation", "question_id", "score").rows()}
    for qid in (1, 26):
        assert by[("horizontal_flip", qid)] == by[("clean", qid)]
    assert by[("clean", 1)] > 0

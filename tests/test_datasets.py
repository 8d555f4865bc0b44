import polars as pl
import pytest

from vqarobust import store
from vqarobust.datasets import question_type
from vqarobust.datasets.prepare import select_images
from vqarobust.metrics import vqa_accuracy


def test_easy_vqa_contract(easy_vqa_eval):
    q = pl.from_arrow(store.read_questions(easy_vqa_eval["questions"]))
    images = list(store.iter_images(easy_vqa_eval["images"]))
    assert len(images) == 6
    assert set(q["image_id"]) == {r["image_id"] for r in images}
    assert q["question_id"].is_unique().all()
    assert (q["answers"].list.len() == 10).all()
    assert all(r["format"] == "png" and (r["width"], r["height"]) == (64, 64) for r in images)
    # One answer repeated ten times: VQA accuracy equals exact match.
    row = q.row(0, named=True)
    assert vqa_accuracy(row["answers"][0], row["answers"]) == 1.0
    assert vqa_accuracy("certainly not", row["answers"]) == 0.0


def test_subset_is_seeded_and_stable():
    ids = list(range(100)) * 3
    a = select_images(ids, 10, seed=0)
    # Stable: pinned (a change here changes every prepared dataset), and the same
    # whatever the order and repeats of the ids it is given.
    assert a == [1, 3, 7, 17, 25, 29, 47, 58, 77, 81]
    assert select_images(ids[::-1], 10, seed=0) == select_images(range(100), 10, seed=0) == a
    assert a != select_images(ids, 10, seed=1)
    assert len(set(a)) == 10 and a == sorted(a)
    assert select_images(ids, None, 0) == list(range(100))
    with pytest.raises(ValueError):
        select_images(ids, 0, 0)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What color is the shape?", "what color is the"),
        ("what is the blue shape?", "what is the"),
        ("Is there a triangle in the image?", "is there a"),
        ("does the image contain a circle?", "does the"),
        ("How many people are in the room?", "how many people are in"),
        ("Whose hat is it?", "none of the above"),
        ("isthere a cat?", "none of the above"),
    ],
)
def test_question_type_takes_longest_whole_word_prefix(question, expected):
    assert question_type(question) == expected

import pytest

from vqarobust.models.postprocess import short_answer


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Yes", "yes"),
        ("Yes, there is a dog in the image.", "yes"),
        ("No. The man is not wearing a hat.", "no"),
        ("yes-man", "yes-man"),
        ("2", "2"),
        ("Two.", "two"),
        ("The answer is 2.", "2"),
        ("Answer: red", "red"),
        ("ASSISTANT: Blue.", "blue"),
        ("**Tennis**", "tennis"),
        ('"fire hydrant"', "fire hydrant"),
        ("Kitchen\n\nThe image shows a stove and a sink.", "kitchen"),
        ("  \n  Frisbee.  \n", "frisbee"),
        ("3.5", "3.5"),
        ("", ""),
        ("Nothing.", "nothing"),
    ],
)
def test_short_answer_on_real_reply_shapes(reply, expected):
    assert short_answer(reply) == expected


def test_the_documented_cases_hold():
    """docs/models.md's reply table: each reply's short answer, its official
    normalization and its VQA accuracy against ten copies of the ground truth."""
    from pathlib import Path

    from vqarobust.metrics.vqa_accuracy import normalize_answer, vqa_accuracy

    text = Path(__file__).parents[1].joinpath("docs", "models.md").read_text(encoding="utf-8")
    table = text.split("<!-- reply-cases -->")[1].split("<!-- /reply-cases -->")[0]
    rows = [line for line in table.strip().splitlines()[2:] if line.startswith("|")]
    assert len(rows) >= 10
    for row in rows:
        reply, answer, normalized, truth, score = [
            c.strip().strip("`") for c in row.strip("|").split("|")
        ]
        reply = reply.replace("\\n", "\n")
        assert short_answer(reply) == answer, row
        assert normalize_answer(answer) == normalized, row
        assert vqa_accuracy(answer, [truth] * 10) == float(score), row

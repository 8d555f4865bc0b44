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

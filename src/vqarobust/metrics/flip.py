"""What a horizontal flip does to a question's answer: which questions it changes, and
the answers a flipped image has.

A mirrored image keeps its objects, colours and counts, but not three things:

- ``answer``: an answer naming a side ("Which side is the man on?" - "left"): on the
  flipped image the right answer is the other side. These can be scored against their
  answers with left and right swapped (:func:`flipped_answers`).
- ``question``: a question naming a side ("What is on the left?", "Is the cup to the
  right of the plate?"): what stands there is another object, whose answer no
  annotation gives. Never scorable.
- ``text``: a question reading text, digits or a clock ("What does the sign say?",
  "What number is on the bus?", "What time is it?"): mirrored writing reads otherwise.
  Never scorable.

A question is marked by words (:data:`SIDE`, :data:`READING`), so a "right" meaning
"correct" marks it too: a question wrongly marked is left out or rescored, never scored
against an answer the flip made wrong. The ``flip_questions`` setting
(``geometric.flip_questions``): ``flip_answers`` (default) scores ``answer`` questions
against the swapped answers and leaves the others out; ``leave_out`` leaves every marked
question out.
"""

from __future__ import annotations

import polars as pl

HORIZONTAL_FLIP = "horizontal_flip"  # the corruption (vqarobust.corruptions.geometric)
KINDS = ("answer", "question", "text")
POLICIES = ("flip_answers", "leave_out")
SIDE = ("left", "right", "lefthand", "righthand")
# Reading words, and the phrases where digits or a clock are read.
READING = ("say", "says", "said", "written", "writing", "read", "reads", "spell", "spelled",
           "letter", "letters", "word", "words", "text", "brand", "logo")  # fmt: skip
READING_PHRASES = (r"numbers? (?:is |are |written )?on", r"numbers? of the", r"what time")
_SIDE_RE = r"\b(?:" + "|".join(SIDE) + r")\b"
_READING_RE = r"\b(?:" + "|".join([*READING, *READING_PHRASES]) + r")\b"


def mark(questions: pl.DataFrame) -> pl.DataFrame:
    """``question_id`` and ``kind`` (one of :data:`KINDS`) of every question a flip
    changes; a question that names a side and reads text is ``text``, one whose question
    and answers both name a side is ``question`` (the annotation cannot say which side
    is asked about after the flip)."""
    text = pl.col("question").str.to_lowercase()
    answers_side = pl.col("answers").list.eval(
        pl.element().str.to_lowercase().str.contains(_SIDE_RE)
    ).list.any()  # fmt: skip
    kind = (
        pl.when(text.str.contains(_READING_RE)).then(pl.lit("text"))
        .when(text.str.contains(_SIDE_RE)).then(pl.lit("question"))
        .when(answers_side).then(pl.lit("answer"))
    )  # fmt: skip
    return (
        questions.select("question_id", kind.alias("kind"))
        .filter(pl.col("kind").is_not_null())
        .sort("question_id")
    )


def left_out(marks: pl.DataFrame, policy: str) -> pl.DataFrame:
    """The marked questions ``policy`` leaves out of scoring."""
    if policy not in POLICIES:
        raise ValueError(f"flip_questions must be one of {', '.join(POLICIES)}, got {policy!r}")
    return marks if policy == "leave_out" else marks.filter(pl.col("kind") != "answer")


def flipped_answers(questions: pl.DataFrame, ids: list[int]) -> pl.DataFrame:
    """``questions`` with left and right (and lefthand, righthand) swapped in the answers
    of ``ids``, whole words only, lower-cased (scoring normalizes case anyway)."""
    swapped = pl.col("answers").list.eval(
        pl.element().str.to_lowercase()
        .str.replace_all(r"\bleft(hand)?\b", "\x00${1}")
        .str.replace_all(r"\bright(hand)?\b", "left${1}")
        .str.replace_all("\x00", "right", literal=True)
    )  # fmt: skip
    chosen = pl.col("question_id").is_in(ids)
    return pl.concat(
        [questions.with_row_index("_row").filter(~chosen),
         questions.with_row_index("_row").filter(chosen).with_columns(swapped)]
    ).sort("_row").drop("_row")  # fmt: skip

"""What a horizontal flip does to a question's answer: which questions it changes, and
the answers a flipped image has.

A mirrored image keeps its objects, colours and counts, but not three things:

- ``answer``: an answer naming a side ("Which side is the man on?" - "left"): on the
  flipped image the right answer is the other side. These can be scored against their
  answers with left and right swapped (:func:`flipped_answers`).
- ``question``: a question naming a side or a turning direction ("What is on the
  left?", "Is the cup to the right of the plate?", "Which is the rightmost dog?", "Does
  it turn clockwise?"), or one whose answer names a turning direction: what stands
  there is another object, whose answer no annotation gives. Never scorable.
- ``text``: a question reading text, digits or a clock ("What does the sign say?",
  "What number is on the bus?", "What is the bus number?", "What time is it?", "What
  is the name of the store?"): mirrored writing reads otherwise. Never scorable.

A question is marked by words (:data:`SIDE`, :data:`TURN`, :data:`READING`), so a
"right" meaning "correct" marks it too, and an answer "1 slice left" is swapped to "1
slice right": marking errs towards leaving out or rescoring. Questions the flip changes
in words none of these lists holds are scored as they are. The ``flip_questions`` setting
(``geometric.flip_questions``): ``flip_answers`` (default) scores ``answer`` questions
against the swapped answers and leaves the others out; ``leave_out`` leaves every marked
question out.
"""

from __future__ import annotations

import polars as pl

HORIZONTAL_FLIP = "horizontal_flip"  # the corruption (vqarobust.corruptions.geometric)
KINDS = ("answer", "question", "text")
POLICIES = ("flip_answers", "leave_out")
SIDE = ("left", "right", "lefthand", "righthand", "leftmost", "rightmost")
TURN = ("clockwise", "counterclockwise", "anticlockwise")
# Reading words, and the phrases where digits, a clock or a name are read.
READING = (
    "say",
    "says",
    "said",
    "written",
    "writing",
    "read",
    "reads",
    "spell",
    "spelled",
    "letter",
    "letters",
    "word",
    "words",
    "text",
    "brand",
    "logo",
)
READING_PHRASES = (
    r"numbers? (?:is |are |written )?on",
    r"numbers? of the",
    r"what time",
    r"what is the time",
    r"number\?",
    r"'s number",
    r"name of (?:the|this) (?:store|shop|restaurant|street|team|company|"
    r"business|airline|bus|train|boat|ship)",
)
_SIDE_RE = r"(?i)\b(?:" + "|".join(SIDE) + r")\b"
_TURN_RE = r"(?i)\b(?:" + "|".join(TURN) + r")\b"
_READING_RE = r"(?i)(?:\b|')(?:" + "|".join([*READING, *READING_PHRASES]) + r")(?:\b|$)"


def mark(questions: pl.DataFrame) -> pl.DataFrame:
    """``question_id`` and ``kind`` (one of :data:`KINDS`) of every question a flip
    changes; a question that names a side and reads text is ``text``, one whose question
    and answers both name a side is ``question`` (the annotation cannot say which side
    is asked about after the flip), and so is one whose answers name a turning direction
    (only sides are swapped)."""
    text = pl.col("question")

    def answers_match(pattern: str) -> pl.Expr:
        return pl.col("answers").list.eval(pl.element().str.contains(pattern)).list.any()

    kind = (
        pl.when(text.str.contains(_READING_RE))
        .then(pl.lit("text"))
        .when(text.str.contains(_SIDE_RE) | text.str.contains(_TURN_RE) | answers_match(_TURN_RE))
        .then(pl.lit("question"))
        .when(answers_match(_SIDE_RE))
        .then(pl.lit("answer"))
    )
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


def _swap_sides(answer: pl.Expr) -> pl.Expr:
    """Left and right swapped (with -hand and -most), whole words, in lower, title and
    upper case alike; the rest of the answer untouched."""
    for left, right in (("left", "right"), ("Left", "Right"), ("LEFT", "RIGHT")):
        suffix = r"(hand|most|HAND|MOST)?\b"
        answer = (
            answer.str.replace_all(rf"\b{left}{suffix}", "\x00${1}")
            .str.replace_all(rf"\b{right}{suffix}", f"{left}${{1}}")
            .str.replace_all("\x00", right, literal=True)
        )
    return answer


def flipped_answers(questions: pl.DataFrame, ids: list[int]) -> pl.DataFrame:
    """``questions`` with left and right (lefthand and righthand, leftmost and
    rightmost) swapped in the answers of ``ids``, whole words only, their case kept."""
    swapped = pl.col("answers").list.eval(_swap_sides(pl.element()))
    chosen = pl.col("question_id").is_in(ids)
    return (
        pl.concat(
            [
                questions.with_row_index("_row").filter(~chosen),
                questions.with_row_index("_row").filter(chosen).with_columns(swapped),
            ]
        )
        .sort("_row")
        .drop("_row")
    )

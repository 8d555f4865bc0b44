"""Question types as VQAv2 defines them: the first words of the question.

VQAv2 assigns each question the longest of 65 fixed prefixes that it starts with
(``mscoco_question_types.txt``); "none of the above" when none matches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl

VQAV2_QUESTION_TYPES: tuple[str, ...] = (
    "how many",
    "is the",
    "what",
    "what color is the",
    "what is the",
    "is this",
    "is this a",
    "what is",
    "are the",
    "what kind of",
    "is there a",
    "what type of",
    "is it",
    "what are the",
    "where is the",
    "is there",
    "does the",
    "what color are the",
    "are these",
    "are there",
    "which",
    "is",
    "what is the man",
    "are",
    "how",
    "does this",
    "what is on the",
    "what does the",
    "how many people are",
    "what is in the",
    "what is this",
    "do",
    "what are",
    "are they",
    "what time",
    "what sport is",
    "are there any",
    "is he",
    "what color is",
    "why",
    "where are the",
    "what color",
    "who is",
    "what animal is",
    "is the woman",
    "is this an",
    "do you",
    "how many people are in",
    "what room is",
    "has",
    "is the man",
    "can you",
    "why is the",
    "what is the color of the",
    "what is the person",
    "could",
    "was",
    "is that a",
    "what number is",
    "what is the name",
    "what brand",
    "what is the woman",
    "what are they",
    "what is he",
    "none of the above",
)

NONE_TYPE = "none of the above"

# Longest prefixes first so that "what color is the" wins over "what".
_BY_LENGTH = sorted((t for t in VQAV2_QUESTION_TYPES if t != NONE_TYPE), key=len, reverse=True)
_WORDS = re.compile(r"[a-z0-9']+")


def question_type(question: str) -> str:
    """The longest VQAv2 question-type prefix of ``question`` (whole words, case-insensitive)."""
    words = " ".join(_WORDS.findall(question.lower()))
    for prefix in _BY_LENGTH:
        if words == prefix or words.startswith(prefix + " "):
            return prefix
    return NONE_TYPE


ANSWER_TYPES: tuple[str, ...] = ("yes/no", "number", "other")


def answer_type(answers: list[str]) -> str:
    """VQAv2's answer type for a question whose annotations give no type.

    The most common answer decides, as in VQAv2's annotation: ``yes/no`` for yes or no,
    ``number`` for a whole number (digits or a number word zero..ten), else ``other``.
    """
    from vqarobust.metrics.vqa_accuracy import most_common_answer

    if not answers:
        return "other"
    top = most_common_answer(answers)
    if top in ("yes", "no"):
        return "yes/no"
    if top.isdigit():
        return "number"
    return "other"


# Datasets with one answer per question repeat it as if this many annotators agreed, so
# that VQA accuracy (docs/metrics.md) is defined and equals exact match.
N_ANNOTATORS = 10


def single_answer_questions(
    question_ids: Sequence[int],
    image_ids: Sequence[int],
    questions: Sequence[str],
    answers: Sequence[str],
) -> pl.DataFrame:
    """The questions table (``store.QUESTION_SCHEMA`` columns) of a dataset with one answer
    per question: the answer repeated :data:`N_ANNOTATORS` times, question and answer
    types derived."""
    return pl.DataFrame(
        {
            "question_id": list(question_ids),
            "image_id": list(image_ids),
            "question": list(questions),
            "answers": [[a] * N_ANNOTATORS for a in answers],
            "question_type": [question_type(q) for q in questions],
            "answer_type": [answer_type([a]) for a in answers],
        },
        schema={
            "question_id": pl.Int64,
            "image_id": pl.Int64,
            "question": pl.String,
            "answers": pl.List(pl.String),
            "question_type": pl.String,
            "answer_type": pl.String,
        },
    )

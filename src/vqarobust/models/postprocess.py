"""Turn a chat model's reply into a short VQA answer.

Generative models answer "Yes, there is a dog." or "The answer is 2.\n\nExplanation: ...";
VQA accuracy compares short answers, so replies are cut to their first line, stripped of
answer prefixes, quotes, markdown emphasis and the trailing period, and a leading yes/no
stands for the whole reply.
"""

from __future__ import annotations

import re

_PREFIX = re.compile(
    r"^(?:assistant\s*:|answer\s*:|short answer\s*:|a\s*:|the answer is\s*:?|"
    r"the correct answer is\s*:?)\s*",
    re.IGNORECASE,
)
_YES_NO = re.compile(r"^(yes|no)\b(?![-'])", re.IGNORECASE)
_WRAP = " \t\"'`*_"


def short_answer(reply: str) -> str:
    """The short answer in a generated reply (lowercase), '' for an empty reply."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    text = lines[0]
    for _ in range(2):  # "Answer: The answer is 2" carries two prefixes
        text = _PREFIX.sub("", text.strip(_WRAP))
    text = text.strip(_WRAP)
    match = _YES_NO.match(text)
    if match:
        return match.group(1).lower()
    text = re.sub(r"[.!]+$", "", text).strip(_WRAP)
    return text.lower()

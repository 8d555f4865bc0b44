"""Scoring one prediction: VQA accuracy and exact match (docs/metrics.md).

``normalize_answer`` follows the official VQA evaluation (vqaEval.py) step for step,
including its quirks, so that numbers match published ones:

* newlines and tabs become spaces, then the text is stripped;
* punctuation in ``PUNCT`` is deleted when it touches a space or when the text contains
  a digit-comma-digit group anywhere, otherwise it becomes a space;
* a period is removed unless a digit follows (the official ``periodStrip`` regex; its
  intended look-behind is written as a look-ahead, so "1.5" keeps its period), at most
  32 times (the official call passes ``re.UNICODE``, 32, where ``re.sub`` takes a count);
* lowercase; number words zero..ten (and "none") become digits; articles a/an/the go;
  the official list of contractions missing an apostrophe is restored.

VQA accuracy comes in two normalizations (``NORMALIZATIONS``):

* ``official`` (vqaEval.py): the prediction is fully normalized; the human answers are
  compared as they are, except that when they disagree (more than one distinct string)
  each gets the punctuation step only. So when all ten say "two", the prediction "two"
  becomes "2" and scores 0;
* ``both``: prediction and human answers are all fully normalized (lmms-eval).

Beside them, ``vqa_accuracy_plain`` is the formula as the visual benchmark's Eq. 2 prints
it, min(#matches / 3, 1) over all the human answers at once, with the official
normalization: 2 of 10 matching give 2/3 (the leave-one-out average gives 0.6), 3 give 1
(0.9).

Scores are vectorized over tables: each distinct string is normalized once, then joined.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

import polars as pl

CONTRACTIONS: dict[str, str] = {
    "aint": "ain't",
    "arent": "aren't",
    "cant": "can't",
    "couldve": "could've",
    "couldnt": "couldn't",
    "couldn'tve": "couldn't've",
    "couldnt've": "couldn't've",
    "didnt": "didn't",
    "doesnt": "doesn't",
    "dont": "don't",
    "hadnt": "hadn't",
    "hadnt've": "hadn't've",
    "hadn'tve": "hadn't've",
    "hasnt": "hasn't",
    "havent": "haven't",
    "hed": "he'd",
    "hed've": "he'd've",
    "he'dve": "he'd've",
    "hes": "he's",
    "howd": "how'd",
    "howll": "how'll",
    "hows": "how's",
    "Id've": "I'd've",
    "I'dve": "I'd've",
    "Im": "I'm",
    "Ive": "I've",
    "isnt": "isn't",
    "itd": "it'd",
    "itd've": "it'd've",
    "it'dve": "it'd've",
    "itll": "it'll",
    "let's": "let's",
    "maam": "ma'am",
    "mightnt": "mightn't",
    "mightnt've": "mightn't've",
    "mightn'tve": "mightn't've",
    "mightve": "might've",
    "mustnt": "mustn't",
    "mustve": "must've",
    "neednt": "needn't",
    "notve": "not've",
    "oclock": "o'clock",
    "oughtnt": "oughtn't",
    "ow's'at": "'ow's'at",
    "'ows'at": "'ow's'at",
    "'ow'sat": "'ow's'at",
    "shant": "shan't",
    "shed've": "she'd've",
    "she'dve": "she'd've",
    "she's": "she's",
    "shouldve": "should've",
    "shouldnt": "shouldn't",
    "shouldnt've": "shouldn't've",
    "shouldn'tve": "shouldn't've",
    "somebody'd": "somebodyd",
    "somebodyd've": "somebody'd've",
    "somebody'dve": "somebody'd've",
    "somebodyll": "somebody'll",
    "somebodys": "somebody's",
    "someoned": "someone'd",
    "someoned've": "someone'd've",
    "someone'dve": "someone'd've",
    "someonell": "someone'll",
    "someones": "someone's",
    "somethingd": "something'd",
    "somethingd've": "something'd've",
    "something'dve": "something'd've",
    "somethingll": "something'll",
    "thats": "that's",
    "thered": "there'd",
    "thered've": "there'd've",
    "there'dve": "there'd've",
    "therere": "there're",
    "theres": "there's",
    "theyd": "they'd",
    "theyd've": "they'd've",
    "they'dve": "they'd've",
    "theyll": "they'll",
    "theyre": "they're",
    "theyve": "they've",
    "twas": "'twas",
    "wasnt": "wasn't",
    "wed've": "we'd've",
    "we'dve": "we'd've",
    "weve": "we've",
    "werent": "weren't",
    "whatll": "what'll",
    "whatre": "what're",
    "whats": "what's",
    "whatve": "what've",
    "whens": "when's",
    "whered": "where'd",
    "wheres": "where's",
    "whereve": "where've",
    "whod": "who'd",
    "whod've": "who'd've",
    "who'dve": "who'd've",
    "wholl": "who'll",
    "whos": "who's",
    "whove": "who've",
    "whyll": "why'll",
    "whyre": "why're",
    "whys": "why's",
    "wont": "won't",
    "wouldve": "would've",
    "wouldnt": "wouldn't",
    "wouldnt've": "wouldn't've",
    "wouldn'tve": "wouldn't've",
    "yall": "y'all",
    "yall'll": "y'all'll",
    "y'allll": "y'all'll",
    "yall'd've": "y'all'd've",
    "y'alld've": "y'all'd've",
    "y'all'dve": "y'all'd've",
    "youd": "you'd",
    "youd've": "you'd've",
    "you'dve": "you'd've",
    "youll": "you'll",
    "youre": "you're",
    "youve": "you've",
}
NUMBER_WORDS: dict[str, str] = {
    "none": "0",
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
ARTICLES = frozenset({"a", "an", "the"})
PUNCT = (
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
)
_PERIOD_STRIP = re.compile(r"(?!<=\d)(\.)(?!\d)")
_COMMA_STRIP = re.compile(r"(\d)(,)(\d)")
# vqaEval.py calls periodStrip.sub("", text, re.UNICODE): the flag lands in ``count``.
_OFFICIAL_PERIOD_COUNT = int(re.UNICODE)
NORMALIZATIONS = ("official", "both")


def process_punctuation(text: str) -> str:
    """The official punctuation step (see the module docstring)."""
    out = text
    has_digit_comma = _COMMA_STRIP.search(text) is not None
    for p in PUNCT:
        if p + " " in text or " " + p in text or has_digit_comma:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD_STRIP.sub("", out, count=_OFFICIAL_PERIOD_COUNT)


def _process_digit_article(text: str) -> str:
    words = [NUMBER_WORDS.get(w, w) for w in text.lower().split()]
    words = [CONTRACTIONS.get(w, w) for w in words if w not in ARTICLES]
    return " ".join(words)


@lru_cache(maxsize=1 << 16)
def normalize_answer(text: str) -> str:
    """Normalize an answer as the official VQA evaluation does (see the module docstring)."""
    text = text.replace("\n", " ").replace("\t", " ").strip()
    return _process_digit_article(process_punctuation(text))


def _loo_accuracy(matches: int, n: int) -> float:
    # Leaving out a matching answer leaves matches-1; leaving out another leaves matches.
    if n == 0:
        return 0.0
    return (matches * min((matches - 1) / 3, 1.0) + (n - matches) * min(matches / 3, 1.0)) / n


def reference_answers(answers: Sequence[str], normalization: str = "official") -> list[str]:
    """The human answers as a prediction is compared with them (see the module docstring)."""
    if normalization == "official":
        if len(set(answers)) > 1:
            return [process_punctuation(a) for a in answers]
        return list(answers)
    if normalization == "both":
        return [normalize_answer(a) for a in answers]
    raise ValueError(f"unknown normalization {normalization!r}; use one of {NORMALIZATIONS}")


def vqa_accuracy(prediction: str, answers: Sequence[str], normalization: str = "official") -> float:
    """VQA accuracy: mean over leave-one-out subsets of min(#matches / 3, 1).

    With ten answers and ``normalization="official"`` this is vqaEval.py's score; with
    fewer answers, the same rule over the answers given. No answers scores 0.
    """
    pred = normalize_answer(prediction)
    matches = sum(a == pred for a in reference_answers(answers, normalization))
    return _loo_accuracy(matches, len(answers))


def vqa_accuracy_plain(prediction: str, answers: Sequence[str]) -> float:
    """The visual benchmark's Eq. 2 as printed: min(#matches / 3, 1) over all the human
    answers (official normalization), no leave-one-out average. No answers scores 0."""
    pred = normalize_answer(prediction)
    matches = sum(a == pred for a in reference_answers(answers, "official"))
    return min(matches / 3, 1.0) if answers else 0.0


def vqa_accuracy_both(prediction: str, answers: Sequence[str]) -> float:
    """VQA accuracy with prediction and human answers both fully normalized."""
    return vqa_accuracy(prediction, answers, normalization="both")


def most_common_answer(answers: Sequence[str]) -> str:
    """The most frequent normalized answer; ties go to the alphabetically first."""
    counts = Counter(normalize_answer(a) for a in answers)
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals the most common normalized answer."""
    if not answers:
        return 0.0
    return float(normalize_answer(prediction) == most_common_answer(answers))


def normalize_column(
    df: pl.DataFrame, column: str, out: str, fn: Callable[[str], str] = normalize_answer
) -> pl.DataFrame:
    """``df`` with ``out`` = ``fn`` (the official normalization) of ``column``, computed
    once per distinct value; nulls stay null."""
    distinct = df.select(pl.col(column).unique())
    mapping = distinct.with_columns(
        pl.col(column).map_elements(fn, return_dtype=pl.String).alias(out)
    )
    return df.join(mapping, on=column, how="left")


def _reference_column(gts: pl.DataFrame, normalization: str) -> pl.DataFrame:
    """Add ``gt_norm``: each human answer as the normalization compares it."""
    if normalization == "both":
        return normalize_column(gts, "gt", "gt_norm")
    gts = normalize_column(gts, "gt", "_gt_punct", process_punctuation)
    disagree = pl.col("gt").n_unique().over("question_id") > 1
    gts = gts.with_columns(
        pl.when(disagree).then(pl.col("_gt_punct")).otherwise(pl.col("gt")).alias("gt_norm")
    )
    return gts.drop("_gt_punct")


def score_predictions(
    predictions: pl.DataFrame, questions: pl.DataFrame, metric: str = "vqa_accuracy"
) -> pl.DataFrame:
    """Add a ``score`` column to ``predictions`` (question_id, answer, ...).

    ``questions`` holds question_id and ``answers`` (a list of strings). ``metric`` is
    ``vqa_accuracy`` (official normalization), ``vqa_accuracy_both``,
    ``vqa_accuracy_plain`` (Eq. 2 without the leave-one-out average) or ``exact_match``.
    Predictions whose question is unknown raise.
    """
    if metric not in METRIC_NAMES:
        raise ValueError(f"unknown metric {metric!r}; known: {sorted(METRIC_NAMES)}")
    unknown = predictions.join(questions.select("question_id"), on="question_id", how="anti")
    if unknown.height:
        ids = unknown["question_id"].unique().head(10).to_list()
        raise ValueError(f"{unknown.height} predictions for unknown question ids, e.g. {ids}")
    gts = questions.select("question_id", "answers").explode("answers")
    gts = gts.rename({"answers": "gt"}).filter(pl.col("gt").is_not_null())
    if metric == "exact_match":
        gts = normalize_column(gts, "gt", "gt_norm")
    else:
        gts = _reference_column(gts, "both" if metric == "vqa_accuracy_both" else "official")
    n = gts.group_by("question_id").agg(pl.len().alias("_n"))
    preds = normalize_column(
        predictions.with_columns(pl.col("answer").fill_null("")).with_row_index("_row"),
        "answer",
        "_pred_norm",
    )
    if metric != "exact_match":
        counts = gts.group_by("question_id", "gt_norm").agg(pl.len().alias("_m"))
        out = preds.join(
            counts,
            left_on=["question_id", "_pred_norm"],
            right_on=["question_id", "gt_norm"],
            how="left",
        ).join(n, on="question_id", how="left")
        m = pl.col("_m").fill_null(0).cast(pl.Float64)
        total = pl.col("_n").fill_null(0).cast(pl.Float64)
        loo = (
            m * pl.min_horizontal((m - 1) / 3, pl.lit(1.0))
            + (total - m) * pl.min_horizontal(m / 3, pl.lit(1.0))
        ) / total
        # Eq. 2 as printed takes all the answers at once; the official score averages it
        # over the leave-one-out subsets.
        plain = pl.min_horizontal(m / 3, pl.lit(1.0))
        score = pl.when(total > 0).then(plain if metric == "vqa_accuracy_plain" else loo)
        score = score.otherwise(0.0)
    else:
        counts = gts.group_by("question_id", "gt_norm").agg(pl.len().alias("_c"))
        mode = (
            counts.sort(["question_id", "_c", "gt_norm"], descending=[False, True, False])
            .group_by("question_id", maintain_order=True)
            .first()
            .select("question_id", pl.col("gt_norm").alias("_mode"))
        )
        out = preds.join(mode, on="question_id", how="left")
        score = (pl.col("_pred_norm") == pl.col("_mode")).fill_null(False).cast(pl.Float64)
    # Joins need not keep row order; restore the caller's.
    return out.with_columns(score.alias("score")).sort("_row").select(*predictions.columns, "score")


METRIC_NAMES = {
    "vqa_accuracy": vqa_accuracy,
    "vqa_accuracy_both": vqa_accuracy_both,
    "vqa_accuracy_plain": vqa_accuracy_plain,
    "exact_match": exact_match,
}

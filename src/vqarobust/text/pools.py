"""Basic-question pools: candidate questions read from question files, deduplicated,
marked yes/no, and encoded once per file.

A pool source is a prepared split's questions table or a file the config names
(``basic_questions.pool_files``): the official VQAv2 questions JSON (optionally with its
annotations file, which gives each question's answer type), JSONL or Parquet with a
``question`` column (and optionally ``answer_type``). Distinct questions are kept once by
normalized text (:func:`vqarobust.text.ranking.normalize_question`), first spelling
first. A question is in the yes/no pool (the paper's YNBQD) when at least half of its
occurrences have answer type ``yes/no``; without answer types, by
:func:`is_yes_no_question`.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from vqarobust import store
from vqarobust.text.ranking import Candidates, normalize_question

log = logging.getLogger(__name__)

POOL_SCHEMA = {
    "question": pl.String,
    "normalized": pl.String,
    "occurrences": pl.Int64,
    "yes_no_occurrences": pl.Int64,
    "yes_no_from": pl.String,  # annotations | rule
}
# VQAv2's yes/no questions open with an auxiliary or modal verb ("Is the ...", "Do you
# ...", "Can ..."); one offering alternatives ("... red or blue?") asks for one of them.
AUXILIARIES = frozenset((
    "is", "are", "was", "were", "am", "be", "been", "do", "does", "did", "has", "have", "had",
    "can", "could", "will", "would", "shall", "should", "may", "might", "must", "isn't",
    "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't", "hasn't", "haven't", "can't",
    "couldn't", "won't", "wouldn't", "shouldn't",
))  # fmt: skip
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def is_yes_no_question(question: str) -> bool:
    """The question-form rule: the first word is an auxiliary or modal verb and the
    question offers no alternatives (no word ``or``)."""
    words = _WORD.findall(question.lower())
    return bool(words) and words[0] in AUXILIARIES and "or" not in words[1:]


def read_pool_source(
    path: str | os.PathLike[str], annotations: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """Questions (``question``, ``answer_type`` or null) of one pool file by its suffix:
    a prepared questions table or any Parquet file with a ``question`` column, JSONL,
    or the official VQAv2 questions JSON (answer types from ``annotations``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"basic-question pool file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        frame = pl.read_parquet(path)
    elif suffix in (".jsonl", ".ndjson"):
        frame = pl.read_ndjson(path, infer_schema_length=None)
    elif suffix == ".json":
        frame = _vqav2_questions(path, annotations)
    else:
        raise ValueError(f"{path}: a pool file is .json (VQAv2 questions), .jsonl or .parquet")
    if annotations is not None and suffix != ".json":
        raise ValueError(f"{path}: annotations go with a VQAv2 questions .json file")
    if "question" not in frame.columns:
        raise ValueError(f"{path} has no 'question' column (has {frame.columns})")
    if "answer_type" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, pl.String).alias("answer_type"))
    out = frame.select(pl.col("question").cast(pl.String), pl.col("answer_type").cast(pl.String))
    empty = out.filter(pl.col("question").is_null() | (pl.col("question").str.strip_chars() == ""))
    if empty.height:
        log.warning("%s: %d empty questions left out of the pool", path, empty.height)
    return out.filter(
        pl.col("question").is_not_null() & (pl.col("question").str.strip_chars() != "")
    )


def _json_records(path: str | os.PathLike[str], key: str, kind: str,
                  columns: Mapping[str, pl.DataType]) -> pl.DataFrame:  # fmt: skip
    """The ``columns`` of the records under ``key`` of a VQAv2 JSON file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise ValueError(f"{path} is not a VQAv2 {kind} file (no '{key}' list)")
    return pl.DataFrame([{c: r.get(c) for c in columns} for r in data[key]], schema=dict(columns))


def _vqav2_questions(path: Path, annotations: str | os.PathLike[str] | None) -> pl.DataFrame:
    questions = _json_records(path, "questions", "questions",
                              {"question_id": pl.Int64, "question": pl.String})  # fmt: skip
    if annotations is None:
        return questions.with_columns(pl.lit(None, pl.String).alias("answer_type"))
    types = _json_records(annotations, "annotations", "annotations",
                          {"question_id": pl.Int64, "answer_type": pl.String})  # fmt: skip
    joined = questions.join(types, on="question_id", how="left", maintain_order="left")
    missing = joined.filter(pl.col("answer_type").is_null()).height
    if missing:
        raise ValueError(f"{annotations} has no answer type for {missing} questions of {path}")
    return joined


def distinct_pool(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per normalized question (``POOL_SCHEMA``): first spelling, how often it
    occurs and how often as a yes/no question (annotations where given, else the rule)."""
    texts = frame["question"].str.strip_chars().to_list()
    rows = frame.select(
        pl.Series("question", texts, pl.String),
        pl.Series("normalized", [normalize_question(t) for t in texts], pl.String),
        pl.when(pl.col("answer_type").is_not_null())
        .then(pl.col("answer_type") == "yes/no")
        .otherwise(pl.Series([is_yes_no_question(t) for t in texts], dtype=pl.Boolean))
        .alias("yes_no"),
        pl.col("answer_type").is_not_null().alias("annotated"),
    )
    return (
        rows.group_by("normalized", maintain_order=True)
        .agg(
            pl.col("question").first(),
            pl.len().cast(pl.Int64).alias("occurrences"),
            pl.col("yes_no").sum().cast(pl.Int64).alias("yes_no_occurrences"),
            pl.when(pl.col("annotated").all())
            .then(pl.lit("annotations"))
            .when(pl.col("annotated").any())
            .then(pl.lit("mixed"))
            .otherwise(pl.lit("rule"))
            .alias("yes_no_from"),
        )  # fmt: skip
        .select(list(POOL_SCHEMA))
    )


def write_pool(
    frame: pl.DataFrame,
    out_path: str | os.PathLike[str],
    encode: Callable[[list[str]], np.ndarray],
) -> int:
    """Deduplicate a source's questions, encode each distinct one and write the pool
    table (``POOL_SCHEMA`` + ``vector``). Returns its rows."""
    pool = distinct_pool(frame)
    texts = pool["question"].to_list()
    vectors = np.asarray(encode(texts), dtype=np.float32) if texts else np.zeros((0, 0))
    table = pool.to_arrow().append_column("vector", pa.array(list(vectors), pa.list_(pa.float32())))
    store.write_table(table, out_path)
    n_yes = int((pool["yes_no_occurrences"] * 2 >= pool["occurrences"]).sum()) if texts else 0
    log.info("pool %s: %d questions, %d distinct, %d yes/no", out_path, frame.height,
             pool.height, n_yes)  # fmt: skip
    return pool.height


def load_pools(paths: Sequence[str | os.PathLike[str]]) -> Candidates:
    """The candidates of several pool tables: distinct across them by normalized text
    (first source first), occurrences summed, yes/no by the majority of occurrences."""
    frames = [pl.read_parquet(p).with_row_index("_row").with_columns(pl.lit(i).alias("_src"))
              for i, p in enumerate(paths)]  # fmt: skip
    if not frames:
        raise ValueError("no basic-question pool")
    every = pl.concat(frames, how="vertical_relaxed")
    merged = every.group_by("normalized", maintain_order=True).agg(
        pl.col("question").first(),
        pl.col("vector").first(),
        pl.col("occurrences").sum(),
        pl.col("yes_no_occurrences").sum(),
    )
    yes_no = (merged["yes_no_occurrences"] * 2 >= merged["occurrences"]).to_numpy()
    vectors = np.array(merged["vector"].to_list(), dtype=np.float32)
    return Candidates(
        merged["question"].to_list(),
        np.array(merged["normalized"].to_list(), dtype=object),
        vectors.reshape(len(merged), -1),
        yes_no,
    )


def pool_sizes(candidates: Candidates) -> Mapping[str, int]:
    """Distinct questions of the general and the yes/no pool."""
    return {"general": len(candidates.texts), "yes_no": int(np.sum(candidates.yes_no))}


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def pool_sources(
    splits: Sequence[str], files: Sequence[str | Mapping[str, str]]
) -> dict[str, dict[str, str | None]]:
    """Name -> {split, questions, annotations} of every pool source, in pool order:
    ``split-<split>`` for a prepared split, ``file-<stem>`` for a pool file (its name
    made safe for a path). Two files with the same name are an error."""
    out: dict[str, dict[str, str | None]] = {
        f"split-{s}": {"split": s, "questions": None, "annotations": None} for s in splits
    }
    for i, entry in enumerate(files):
        spec = {"questions": entry} if isinstance(entry, str) else dict(entry)
        stem = Path(str(spec["questions"])).name
        for suffix in (".parquet", ".jsonl", ".ndjson", ".json"):
            stem = stem.removesuffix(suffix)
        name = "file-" + (_UNSAFE.sub("_", stem) or str(i))
        if name in out:
            raise ValueError(f"two pool files are named {stem!r} ([{i}]); rename one")
        out[name] = {"split": None, "questions": str(spec["questions"]),
                     "annotations": spec.get("annotations")}  # fmt: skip
    return out

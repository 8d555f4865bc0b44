"""Basic-question pools: candidate questions read from question files, deduplicated,
marked yes/no, and encoded once per file.

A pool source is a prepared split's questions table or a file the config names
(``basic_questions.pool_files``): an official VQA questions JSON, VQA v1 or VQAv2
(optionally with its annotations file, which gives each question's answer type), JSONL
or Parquet with a ``question`` column (and optionally ``answer_type``). An entry
``{vqa: v1, folder: ..., split: train2014}`` names an official file by its release, split
and task (:func:`official_files`): the basic-question paper's pool is VQA v1's train2014
and val2014 questions.

VQA v1 and VQAv2 question files share one layout (``info``, ``task_type``,
``data_type``, ``data_subtype``, ``license``, ``questions``: ``image_id``, ``question``,
``question_id``), as do their annotations. What differs: the names (VQAv2's start with
``v2_``), v1's second task (``MultipleChoice_...``: the same questions and ids as
``OpenEnded_...``, each with 18 ``multiple_choices``, which a pool ignores), and the
question ids (v1: image id x 10 + n; VQAv2: image id x 1000 + n), so a v1 questions file
never pairs with VQAv2 annotations. Distinct questions are kept once by
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
AUXILIARIES = frozenset(
    (
        "is",
        "are",
        "was",
        "were",
        "am",
        "be",
        "been",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "can",
        "could",
        "will",
        "would",
        "shall",
        "should",
        "may",
        "might",
        "must",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "don't",
        "doesn't",
        "didn't",
        "hasn't",
        "haven't",
        "can't",
        "couldn't",
        "won't",
        "wouldn't",
        "shouldn't",
    )
)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def is_yes_no_question(question: str) -> bool:
    """The question-form rule: the first word is an auxiliary or modal verb and the
    question offers no alternatives (no word ``or``)."""
    words = _WORD.findall(question.lower())
    return bool(words) and words[0] in AUXILIARIES and "or" not in words[1:]


# The official file names of one split (VQA v1: Antol et al. 2015; VQAv2: Goyal et al.
# 2017). VQAv2 has no multiple-choice task; the test splits have no annotations.
RELEASES = ("v1", "v2")
TASKS = ("OpenEnded", "MultipleChoice")
SPLITS = ("train2014", "val2014", "test2015", "test-dev2015")


def official_files(
    release: str, folder: str, split: str, task: str = "OpenEnded", annotations: bool = True
) -> dict[str, str | None]:
    """The questions (and annotations) file of a VQA release's split under ``folder``,
    by the official names: ``OpenEnded_mscoco_train2014_questions.json`` and
    ``mscoco_train2014_annotations.json`` (v1), ``v2_OpenEnded_mscoco_train2014_...``
    (v2). Raises ``ValueError`` for a combination the release does not have."""
    if release not in RELEASES:
        raise ValueError(f"vqa is one of {RELEASES}, not {release!r}")
    if task not in TASKS:
        raise ValueError(f"task is one of {TASKS}, not {task!r}")
    if split not in SPLITS:
        raise ValueError(f"split is one of {SPLITS}, not {split!r}")
    if release == "v2" and task != "OpenEnded":
        raise ValueError("VQAv2 has no MultipleChoice task (VQA v1 has)")
    if annotations and split.startswith("test"):
        raise ValueError(f"{split} has no public annotations: set annotations: false")
    prefix = "v2_" if release == "v2" else ""
    root = str(folder).rstrip("/")
    return {
        "questions": f"{root}/{prefix}{task}_mscoco_{split}_questions.json",
        "annotations": f"{root}/{prefix}mscoco_{split}_annotations.json" if annotations else None,
    }


def read_pool_source(
    path: str | os.PathLike[str], annotations: str | os.PathLike[str] | None = None
) -> pl.DataFrame:
    """Questions (``question``, ``answer_type`` or null) of one pool file by its suffix:
    a prepared questions table or any Parquet file with a ``question`` column, JSONL,
    or an official VQA v1 or VQAv2 questions JSON (answer types from ``annotations``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"basic-question pool file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        frame = pl.read_parquet(path)
    elif suffix in (".jsonl", ".ndjson"):
        frame = pl.read_ndjson(path, infer_schema_length=None)
    elif suffix == ".json":
        frame = _vqa_questions(path, annotations)
    else:
        raise ValueError(f"{path}: a pool file is .json (VQA questions), .jsonl or .parquet")
    if annotations is not None and suffix != ".json":
        raise ValueError(f"{path}: annotations go with a VQA questions .json file")
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


def _json_records(
    path: str | os.PathLike[str], key: str, kind: str, columns: Mapping[str, pl.DataType]
) -> tuple[pl.DataFrame, str]:
    """The ``columns`` of the records under ``key`` of a VQA (v1 or v2) JSON file, and
    what its header says it is (version, task, split), for the log."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise ValueError(f"{path} is not a VQA {kind} file (no '{key}' list)")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    named = (info.get("version"), data.get("task_type"), data.get("data_subtype"))
    header = " ".join(str(v) for v in named if v)
    frame = pl.DataFrame([{c: r.get(c) for c in columns} for r in data[key]], schema=dict(columns))
    return frame, header or "no header"


def _vqa_questions(path: Path, annotations: str | os.PathLike[str] | None) -> pl.DataFrame:
    questions, header = _json_records(
        path, "questions", "questions", {"question_id": pl.Int64, "question": pl.String}
    )
    log.info("%s: VQA questions (%s), %d questions", path, header, questions.height)
    if annotations is None:
        return questions.with_columns(pl.lit(None, pl.String).alias("answer_type"))
    types, _ = _json_records(
        annotations,
        "annotations",
        "annotations",
        {"question_id": pl.Int64, "answer_type": pl.String},
    )
    joined = questions.join(types, on="question_id", how="left", maintain_order="left")
    missing = joined.filter(pl.col("answer_type").is_null()).height
    if missing:
        raise ValueError(
            f"{annotations} has no answer type for {missing} questions of {path} (VQA v1 "
            "question ids are image id x 10 + n, VQAv2's image id x 1000 + n: a release's "
            "questions pair only with its own annotations)"
        )
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
        )
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
    log.info(
        "pool %s: %d questions, %d distinct, %d yes/no", out_path, frame.height, pool.height, n_yes
    )
    return pool.height


def load_pools(paths: Sequence[str | os.PathLike[str]]) -> Candidates:
    """The candidates of several pool tables: distinct across them by normalized text
    (first source first), occurrences summed, yes/no by the majority of occurrences."""
    frames = [
        pl.read_parquet(p).with_row_index("_row").with_columns(pl.lit(i).alias("_src"))
        for i, p in enumerate(paths)
    ]
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
    made safe for a path; an official file named by ``vqa``, ``folder``, ``split``, ``task``
    and ``annotations``, :func:`official_files`). Two files with the same name are an
    error."""
    out: dict[str, dict[str, str | None]] = {
        f"split-{s}": {"split": s, "questions": None, "annotations": None} for s in splits
    }
    for i, entry in enumerate(files):
        spec = {"questions": entry} if isinstance(entry, str) else dict(entry)
        if "vqa" in spec:
            task, notes = spec.get("task", "OpenEnded"), spec.get("annotations", True)
            spec = official_files(spec["vqa"], spec["folder"], spec["split"], task, notes)
        stem = Path(str(spec["questions"])).name
        for suffix in (".parquet", ".jsonl", ".ndjson", ".json"):
            stem = stem.removesuffix(suffix)
        name = "file-" + (_UNSAFE.sub("_", stem) or str(i))
        if name in out:
            raise ValueError(f"two pool files are named {stem!r} ([{i}]); rename one")
        out[name] = {
            "split": None,
            "questions": str(spec["questions"]),
            "annotations": spec.get("annotations"),
        }
    return out

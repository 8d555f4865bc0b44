"""Materialize perturbed question sets (modalities ``text`` and ``basic_question``).

Each set is one Parquet file of ``store.QUESTION_SET_SCHEMA`` per severity (or noise
level): the dataset's questions with the text a model is asked instead. Inference asks it
about the clean image.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from vqarobust import store, text
from vqarobust.text import ranking as bq

log = logging.getLogger(__name__)


def _question_frame(questions_path: str | os.PathLike[str]) -> pl.DataFrame:
    return pl.from_arrow(store.read_questions(questions_path)).select(
        "question_id", "image_id", "question"
    )


def _write_set(
    frame: pl.DataFrame,
    perturbed: Sequence[str],
    name: str,
    severity: int,
    path: Any,
    similarity: Sequence[float] | None = None,
    tries: Sequence[int] | None = None,
) -> None:
    n = frame.height
    # A question the fidelity filter dropped has no perturbed text (None): not asked.
    changed = [
        None if b is None else a != b
        for a, b in zip(frame["question"].to_list(), perturbed, strict=True)
    ]
    table = pa.table(
        {
            "question_id": frame["question_id"].to_arrow(),
            "image_id": frame["image_id"].to_arrow(),
            "original": frame["question"].to_arrow(),
            "perturbed": pa.array(list(perturbed), pa.string()),
            "perturbation": pa.array([name] * n, pa.string()),
            "severity": pa.array([severity] * n, store.SEVERITY),
            "changed": pa.array(changed, pa.bool_()),
            "similarity": pa.array(similarity, pa.float32())
            if similarity is not None
            else pa.nulls(n, pa.float32()),
            "tries": pa.array(tries, pa.int16()) if tries is not None else pa.nulls(n, pa.int16()),
        },
        schema=store.QUESTION_SET_SCHEMA,
    )
    store.write_table(table, path)


ON_LOW_SIMILARITY = ("keep_best", "keep_last", "drop")


def fidelity_filter(
    originals: Sequence[str],
    draw: Callable[[int, int], str],
    min_similarity: float,
    max_tries: int,
    encode: Callable[[list[str]], np.ndarray],
    on_low_similarity: str = "keep_best",
) -> tuple[list[str | None], np.ndarray, np.ndarray]:
    """Resample perturbed questions whose embedding similarity to the original falls under
    ``min_similarity``: ``draw(i, attempt)`` perturbs question i. A question still under
    it after ``max_tries`` draws keeps its most similar draw (``keep_best``), its last
    draw (``keep_last``, what the multimodal paper's code does), or is dropped from the
    set (``drop``: its text is None and it is not asked). Returns (questions, the kept
    draw's similarity, tries)."""
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    if on_low_similarity not in ON_LOW_SIMILARITY:
        raise ValueError(
            f"on_low_similarity must be one of {ON_LOW_SIMILARITY}, got {on_low_similarity!r}"
        )
    n = len(originals)
    base = encode(list(originals))
    best: list[str | None] = [""] * n
    best_sim = np.full(n, -np.inf, dtype=np.float32)
    tries = np.zeros(n, dtype=np.int16)
    last: list[str] = [""] * n
    last_sim = np.full(n, -np.inf, dtype=np.float32)
    pending = np.arange(n)
    for attempt in range(max_tries):
        drawn = [draw(int(i), attempt) for i in pending]
        sim = np.einsum("ij,ij->i", encode(drawn), base[pending]).astype(np.float32)
        tries[pending] = attempt + 1
        for j, i in enumerate(pending):
            last[i] = drawn[j]
        last_sim[pending] = sim
        better = sim > best_sim[pending]
        for j in np.flatnonzero(better):
            best[pending[j]] = drawn[j]
        best_sim[pending] = np.maximum(best_sim[pending], sim)
        pending = pending[sim < min_similarity]
        if not len(pending):
            break
    if len(pending):
        kept = {
            "keep_best": "the most similar draw is kept",
            "keep_last": "the last draw is kept",
            "drop": "dropped",
        }[on_low_similarity]
        log.warning(
            "fidelity filter: %d of %d questions stay under similarity %.2f after %d tries (%s)",
            len(pending),
            n,
            min_similarity,
            max_tries,
            kept,
        )
        for i in pending:
            if on_low_similarity == "drop":
                best[i] = None
            elif on_low_similarity == "keep_last":
                best[i], best_sim[i] = last[i], last_sim[i]
    return best, best_sim, tries


@dataclass(frozen=True)
class Fidelity:
    """The fidelity filter (config ``text``): resample a perturbed question whose
    similarity to the original is under ``min_similarity``, up to ``max_tries`` draws;
    ``on_low_similarity="drop"`` then leaves out one still under it. Similarity is the
    cosine of the embeddings of the sentence-transformers encoder
    ``similarity_encoder`` (a folder or a Hub id in the local cache; None: the shipped
    MiniLM)."""

    min_similarity: float
    max_tries: int = 5
    on_low_similarity: str = "keep_best"
    similarity_encoder: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Fidelity | None:
        """The filter a job's params ask for; None where ``min_similarity`` is null."""
        return None if params.get("min_similarity") is None else cls(**params)

    def encoder(self) -> Callable[[list[str]], np.ndarray]:
        """The filter's encoder: ``similarity_encoder``'s, or the shipped MiniLM."""
        from functools import partial

        from vqarobust.text.encoder import encode

        return partial(encode, path=self.similarity_encoder)


def perturb_question_set(
    questions_path: str | os.PathLike[str],
    out_paths: Mapping[int, str | os.PathLike[str]],
    perturbation: str,
    global_seed: int = 0,
    fidelity: Fidelity | None = None,
    encode: Callable[[list[str]], np.ndarray] | None = None,
    rates: text.Rates = text.RATES,
) -> int:
    """Write the questions perturbed by ``perturbation`` at each severity of ``out_paths``
    (severity -> Parquet path) at ``rates``. Each question's seed derives from (global
    seed, question id, perturbation, severity). With a ``fidelity`` filter a question is resampled
    (similarity and tries are recorded) and, with ``on_low_similarity="drop"``, left out
    (null ``perturbed``) when still under it. ``encode`` replaces the filter's encoder
    (tests). Returns the number of questions per set."""
    frame = _question_frame(questions_path)
    ids, originals = frame["question_id"].to_list(), frame["question"].to_list()
    for severity, path in sorted(out_paths.items()):
        if fidelity is None:
            out = [
                text.perturb_item(q, perturbation, severity, global_seed, i, 0, rates)
                for q, i in zip(originals, ids, strict=True)
            ]
            _write_set(frame, out, perturbation, severity, path)
        else:
            if encode is None:
                encode = fidelity.encoder()
            out, sim, tries = fidelity_filter(
                originals,
                lambda i, attempt, s=severity: text.perturb_item(
                    originals[i], perturbation, s, global_seed, ids[i], attempt, rates
                ),
                fidelity.min_similarity,
                fidelity.max_tries,
                encode,
                fidelity.on_low_similarity,
            )
            _write_set(frame, out, perturbation, severity, path, sim.tolist(), tries.tolist())
        changed = sum(b is not None and a != b for a, b in zip(originals, out, strict=True))
        dropped = sum(b is None for b in out)
        log.info(
            "%s severity %d: %d of %d questions changed, %d dropped -> %s",
            perturbation,
            severity,
            changed,
            len(out),
            dropped,
            path,
        )
    return frame.height


def rewrite_question_set(
    questions_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    name: str,
    settings: Mapping[str, Any],
    global_seed: int = 0,
    fidelity: Fidelity | None = None,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> int:
    """Write the questions rewritten by the sentence-level perturbation ``name`` (one
    level, severity 1) with the models of ``settings``, each distinct question once. A
    rewrite with ``sampling`` draws from the seed of (global seed, name, question,
    draw). Under a ``fidelity`` filter a sampled rewrite is redrawn up to ``max_tries``
    times; a greedy one is scored once, since each redraw would repeat it (its 100 draws
    are one), and then kept or dropped as ``on_low_similarity`` says. Returns the number
    of questions."""
    from vqarobust.seeding import derive_seed
    from vqarobust.text.sentence import SentenceRewrite, keep_originals

    frame = _question_frame(questions_path)
    originals = frame["question"].to_list()
    distinct = list(dict.fromkeys(originals))
    rewriter = SentenceRewrite(name, settings)
    sim = tries = None
    if not rewriter.samples:
        greedy = list(rewriter.draw(distinct))

        def draw(i: int, attempt: int) -> str:
            return greedy[i]

    else:

        def draw(i: int, attempt: int) -> str:
            # As drawn: an empty rewrite scores as one (it is not the original question).
            seed = derive_seed(global_seed, name, distinct[i], attempt)
            return rewriter.draw([distinct[i]], [seed])[0]

    if fidelity is None:
        drawn: list[str | None] = [draw(i, 0) for i in range(len(distinct))]
    else:
        if encode is None:
            encode = fidelity.encoder()
        max_tries = fidelity.max_tries if rewriter.samples else 1
        drawn, sims, n_tries = fidelity_filter(
            distinct,
            draw,
            fidelity.min_similarity,
            max_tries,
            encode,
            fidelity.on_low_similarity,
        )
        row = {q: i for i, q in enumerate(distinct)}
        sim = [float(sims[row[q]]) for q in originals]
        tries = [int(n_tries[row[q]]) for q in originals]
    rewrites, empty = keep_originals(drawn, distinct, name)
    lookup = dict(zip(distinct, rewrites, strict=True))
    _write_set(frame, [lookup[q] for q in originals], name, 1, out_path, sim, tries)
    log.info(
        "%s: %d distinct questions rewritten (%d empty rewrites kept the original) -> %s",
        name,
        len(distinct),
        empty,
        out_path,
    )
    return frame.height


def embed_questions(
    question_paths: Sequence[str | os.PathLike[str]],
    out_path: str | os.PathLike[str],
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> int:
    """Encode every distinct question of ``question_paths`` once (the shipped MiniLM
    unless ``encode`` is given); one Parquet table (question, vector). Returns its rows."""
    if encode is None:
        from vqarobust.text.encoder import encode
    texts = list(dict.fromkeys(q for p in question_paths for q in _question_frame(p)["question"]))
    vectors = encode(texts)
    table = pa.table(
        {
            "question": pa.array(texts, pa.string()),
            "vector": pa.array(list(vectors), pa.list_(pa.float32())),
        }
    )
    store.write_table(table, out_path)
    log.info("%d distinct questions encoded -> %s", len(texts), out_path)
    return len(texts)


def build_pool(
    source_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    annotations: str | os.PathLike[str] | None = None,
    encode: Callable[[list[str]], np.ndarray] | None = None,
) -> int:
    """One pool source (a prepared questions table or a pool file) deduplicated, marked
    yes/no and encoded (:mod:`vqarobust.text.pools`). Returns its distinct questions."""
    from vqarobust.text import pools

    if encode is None:
        from vqarobust.text.encoder import encode
    return pools.write_pool(pools.read_pool_source(source_path, annotations), out_path, encode)


def embedding_lookup(path: str | os.PathLike[str]) -> Callable[[list[str]], np.ndarray]:
    """An ``encode`` function over stored embeddings; a text not stored is an error."""
    table = pl.read_parquet(path)
    row = {q: i for i, q in enumerate(table["question"].to_list())}
    vectors = np.array(table["vector"].to_list(), dtype=np.float32)

    def encode(sentences: list[str]) -> np.ndarray:
        missing = [s for s in sentences if s not in row]
        if missing:
            raise KeyError(f"{path} has no embedding of {len(missing)} questions: {missing[:3]}")
        return vectors[[row[s] for s in sentences]]

    return encode


def rank_basic_questions(
    questions_path: str | os.PathLike[str],
    pool_paths: Sequence[str | os.PathLike[str]],
    out_path: str | os.PathLike[str],
    rankers: Sequence[str],
    settings: bq.RankSettings = bq.DEFAULT_RANKING,
    embeddings_path: str | os.PathLike[str] | None = None,
) -> int:
    """Rank basic questions for every distinct question of ``questions_path`` against the
    pool tables ``pool_paths`` (:func:`build_pool`) with each ranker; one Parquet table of
    ``bq.RANKING_SCHEMA``. ``embeddings_path`` holds the main questions' embeddings
    (:func:`embed_questions`); without it they are encoded here. Returns its rows."""
    from vqarobust.text import pools

    mqs = _question_frame(questions_path)["question"].to_list()
    pool = pools.load_pools(pool_paths)
    sizes = pools.pool_sizes(pool)
    log.info("pool: %d distinct questions, %d yes/no", sizes["general"], sizes["yes_no"])
    encode = embedding_lookup(embeddings_path) if embeddings_path else None
    table = bq.rank_table(mqs, pool, rankers, settings, encode=encode)
    store.write_table(table.to_arrow(), out_path)
    return table.height


def chain_question_set(
    questions_path: str | os.PathLike[str],
    rankings_path: str | os.PathLike[str],
    out_paths: Sequence[str | os.PathLike[str]],
    template: str = bq.DEFAULT_CHAIN_PROMPT,
) -> int:
    """VQABQ's question sets for one model (perturbation ``vqabq_chain``): at severity n
    (``out_paths[n - 1]``, n = 1..3) each question with its first n basic questions of
    the ranking through the model's ``template`` (a generative model's chain prompt, or
    :data:`vqarobust.text.ranking.CONCAT_PROMPT`). Returns the rows of each set."""
    if len(out_paths) != bq.PER_LEVEL:
        raise ValueError(f"VQABQ writes {bq.PER_LEVEL} question sets, got {len(out_paths)} paths")
    frame = _question_frame(questions_path)
    ranks = pl.read_parquet(rankings_path)
    top = (
        ranks.filter(pl.col("rank") <= bq.PER_LEVEL)
        .sort("rank")
        .group_by("question", maintain_order=True)
        .agg(pl.col("basic_question"))
    )
    joined = frame.join(top, on="question", how="left", maintain_order="left")
    short = joined.filter(
        pl.col("basic_question").is_null() | (pl.col("basic_question").list.len() < bq.PER_LEVEL)
    )
    if short.height:
        raise ValueError(f"{rankings_path}: {short.height} questions lack three basic questions")
    pairs = joined.select("question", "basic_question").rows()
    for n, out_path in enumerate(out_paths, start=1):
        out = [bq.chain_question(q, b[:n], template) for q, b in pairs]
        _write_set(frame, out, bq.CHAIN, n, out_path)
        log.info("%s with %d basic questions: %d questions -> %s", bq.CHAIN, n, len(out), out_path)
    return frame.height


def export_basic_questions(
    questions_path: str | os.PathLike[str],
    rankings_path: str | os.PathLike[str],
    out_parquet: str | os.PathLike[str],
    out_json: str | os.PathLike[str],
) -> int:
    """A basic-question dataset in the paper's structure, one row per main question:
    ``question_id``, ``image_id``, ``question`` and its ranked ``basic_questions`` (rank,
    basic question, score, source), with ``ranker``, ``dataset`` and ``method`` (how it
    was ranked), as Parquet and as JSON. Returns its rows."""
    import json

    frame = _question_frame(questions_path)
    ranks = pl.read_parquet(rankings_path)
    names = ranks["ranker"].unique().to_list()
    if len(names) != 1:
        raise ValueError(f"{rankings_path} holds rankings of {names}, not of one ranker")
    lists = (
        ranks.sort("question", "rank")
        .group_by("question", maintain_order=True)
        .agg(pl.struct("rank", "basic_question", "score", "source").alias("basic_questions"))
    )
    out = frame.join(lists, on="question", how="left", maintain_order="left")
    missing = out.filter(pl.col("basic_questions").is_null())
    if missing.height:
        raise ValueError(
            f"{rankings_path} has no basic questions for {missing.height} "
            f"questions, e.g. {missing['question'].head(3).to_list()}"
        )
    # How it was ranked (LASSO's mode and settings, BLEU's smoothing), where it was written.
    method = ranks["method"][0] if "method" in ranks.columns else None
    out = out.with_columns(
        pl.lit(names[0]).alias("ranker"),
        pl.lit(bq.bq_dataset(names[0])).alias("dataset"),
        pl.lit(method, pl.String).alias("method"),
    )
    store.write_table(out.to_arrow(), out_parquet)
    with store.atomic_path(out_json) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        json.dump(out.to_dicts(), fh, indent=1)
    log.info("%s: %d main questions -> %s, %s", names[0], out.height, out_parquet, out_json)
    return out.height


def basic_question_sets(
    questions_path: str | os.PathLike[str],
    rankings_path: str | os.PathLike[str],
    perturbation: str,
    out_paths: Mapping[int, str | os.PathLike[str]],
) -> int:
    """Write, per noise level L of ``out_paths``, each question followed by its basic
    questions ranked 3L-2..3L by ``perturbation``'s ranker."""
    frame = _question_frame(questions_path)
    ranks = pl.read_parquet(rankings_path).filter(pl.col("ranker") == perturbation)
    if not ranks.height:
        raise ValueError(f"{rankings_path} holds no rankings of {perturbation}")
    for level, path in sorted(out_paths.items()):
        lo, hi = bq.PER_LEVEL * (level - 1) + 1, bq.PER_LEVEL * level
        chosen = (
            ranks.filter(pl.col("rank").is_between(lo, hi))
            .sort("rank")
            .group_by("question", maintain_order=True)
            .agg(pl.col("basic_question"))
        )
        joined = frame.join(chosen, on="question", how="left", maintain_order="left")
        short = joined.filter(
            pl.col("basic_question").is_null() | (pl.col("basic_question").list.len() < hi - lo + 1)
        )
        if short.height:
            raise ValueError(
                f"{rankings_path}: {short.height} questions lack basic questions ranked "
                f"{lo}-{hi} for {perturbation}, e.g. {short['question'].head(3).to_list()}"
            )
        pairs = joined.select("question", "basic_question").rows()
        out = [bq.noisy_question(q, b) for q, b in pairs]
        _write_set(frame, out, perturbation, level, path)
        log.info("%s level %d: %d questions -> %s", perturbation, level, len(out), path)
    return frame.height

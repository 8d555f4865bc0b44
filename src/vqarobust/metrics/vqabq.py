"""VQABQ, the basic-question paper's second half: answer a main question (MQ) together
with its top basic questions, but only when those are close enough (its Algorithm 1).

Per MQ the top three basic questions of one ranker (default ``bq_lasso``) have scores
score1 >= score2 >= score3; they are selected when score1 >= s1, score2 / score1 >= s2
and score3 / score2 >= s3 (the paper: s1 = 0.60, s2 = 0.58, s3 = 0.41, first estimated
as avg +- std of each quantity, its Table 5; ``auto`` here: avg - std). A rank that is a
fill (its ``source`` is not the ranker's own, e.g. LASSO's cosine fill) has no ranker
score: such an MQ is not selected. A selected MQ is answered with the MQ followed by the
three basic questions, which is the ranker's level-1 question set (the paper's "direct
concatenation"), so its answer is that subset's prediction; every other MQ keeps its
clean answer. A generative or chat model is asked the basic questions first and then
the MQ instead (its chain-of-questions subset ``vqabq_chain``, the model entry's
``chain_prompt``). Tables (the paper's Tables 5-7): the score statistics and thresholds, and
per model the share of MQs selected, accuracy MQ-only vs VQABQ over all MQs and over the
selected ones, and the questions gained and lost.

The optional grid search tunes (s1, s2, s3) on a seeded half of the MQs (split by
question id) and reports the tuned thresholds on the other half only, next to the
configured thresholds on that same half.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from vqarobust.seeding import derive_seed
from vqarobust.text.ranking import CHAIN  # the generative models' chain subset

PAPER_THRESHOLDS = (0.60, 0.58, 0.41)
QUANTITIES = ("score1", "ratio2", "ratio3")
GRID = tuple(round(x, 2) for x in np.arange(0.0, 1.0001, 0.05))


def top3(rankings: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """Per question of ``questions`` (question_id, question): the three top-ranked basic
    questions' scores of ``rankings`` (one ranker), their ratios, and whether all three
    are the ranker's own scores (``own``)."""
    names = rankings["ranker"].unique().to_list()
    if len(names) != 1:
        raise ValueError(f"VQABQ reads one ranker's rankings, got {names}")
    from vqarobust.text.ranking import ranker_name

    own_source = ranker_name(names[0])
    top = rankings.filter(pl.col("rank") <= 3).sort("question", "rank")
    wide = top.group_by("question", maintain_order=True).agg(
        pl.col("score").get(0).alias("score1"),
        pl.col("score").get(1).alias("score2"),
        pl.col("score").get(2).alias("score3"),
        (pl.col("source") == own_source).all().alias("own"),
        pl.len().alias("_n"),
    )
    if wide.filter(pl.col("_n") < 3).height:
        raise ValueError("VQABQ needs three ranked basic questions per main question")
    out = questions.select("question_id", "question").join(
        wide.drop("_n"), on="question", how="left", maintain_order="left"
    )
    missing = out.filter(pl.col("score1").is_null())
    if missing.height:
        raise ValueError(f"{missing.height} questions have no basic questions of {names[0]}")
    return out.with_columns(
        (pl.col("score2") / pl.col("score1")).alias("ratio2"),
        (pl.col("score3") / pl.col("score2")).alias("ratio3"),
    ).with_columns(pl.col("ratio2", "ratio3").fill_nan(None))


def score_statistics(scores: pl.DataFrame) -> pl.DataFrame:
    """The paper's Table 5: avg and std (sample) of score1, score2/score1 and
    score3/score2 over the MQs whose top three are the ranker's own scores."""
    own = scores.filter(pl.col("own"))
    return pl.DataFrame(
        {
            "quantity": list(QUANTITIES),
            "n": [own[q].drop_nulls().len() for q in QUANTITIES],
            "avg": [own[q].drop_nulls().mean() for q in QUANTITIES],
            "std": [own[q].drop_nulls().std() for q in QUANTITIES],
        },
        schema={"quantity": pl.String, "n": pl.Int64, "avg": pl.Float64, "std": pl.Float64},
    )


def thresholds(setting: str | Sequence[float], stats: pl.DataFrame) -> tuple[float, ...]:
    """(s1, s2, s3): given, or ``auto`` (avg - std of each quantity)."""
    if setting == "auto":
        if stats["avg"].null_count() or stats["std"].null_count():
            raise ValueError("VQABQ thresholds 'auto' need at least two main questions whose "
                             "top three basic questions carry the ranker's own scores")  # fmt: skip
        return tuple(float(a - s) for a, s in zip(stats["avg"], stats["std"], strict=True))
    values = tuple(float(v) for v in setting)  # type: ignore[union-attr]
    if len(values) != 3:
        raise ValueError(f"VQABQ thresholds are (s1, s2, s3), got {values}")
    return values


def select(scores: pl.DataFrame, s: Sequence[float]) -> pl.Series:
    """Algorithm 1: own scores, score1 >= s1, score2/score1 >= s2, score3/score2 >= s3."""
    s1, s2, s3 = s
    chosen = (
        pl.col("own")
        & (pl.col("score1") >= s1)
        & (pl.col("ratio2") >= s2).fill_null(False)
        & (pl.col("ratio3") >= s3).fill_null(False)
    )
    return scores.select(chosen.alias("selected"))["selected"]


TABLE_SCHEMA = {
    "model": pl.String, "split": pl.String, "s1": pl.Float64, "s2": pl.Float64,
    "s3": pl.Float64, "questions": pl.Int64, "selected": pl.Int64, "share_selected": pl.Float64,
    "acc_mq": pl.Float64, "acc_vqabq": pl.Float64, "acc_mq_selected": pl.Float64,
    "acc_vqabq_selected": pl.Float64, "gained": pl.Int64, "lost": pl.Int64,
    "net_questions": pl.Float64,
}  # fmt: skip


def accuracy_table(
    clean: pl.DataFrame, with_bq: pl.DataFrame, selected: pl.DataFrame, s: Sequence[float],
    split: str = "all",
) -> pl.DataFrame:  # fmt: skip
    """Per model (Tables 6-7): ``clean`` and ``with_bq`` (model, question_id, score: the
    MQ alone and the MQ followed by its three basic questions) over the questions of
    ``selected`` (question_id, selected). VQABQ's score is ``with_bq``'s on a selected
    MQ and the clean one elsewhere; gained / lost count selected MQs whose score rose /
    fell, ``net_questions`` the summed change (questions' worth of accuracy)."""
    rows = []
    for model in sorted(set(clean["model"])):
        base = clean.filter(pl.col("model") == model).select("question_id", "score")
        bq = with_bq.filter(pl.col("model") == model).select(
            "question_id", pl.col("score").alias("bq_score")
        )
        t = selected.join(base, on="question_id", how="inner").join(
            bq, on="question_id", how="left"
        )
        missing = t.filter(pl.col("selected") & pl.col("bq_score").is_null()).height
        if missing:
            raise ValueError(f"{model}: {missing} selected questions have no answer with their "
                             "basic questions")  # fmt: skip
        t = t.with_columns(
            pl.when(pl.col("selected")).then(pl.col("bq_score")).otherwise(pl.col("score"))
            .alias("vqabq")
        )  # fmt: skip
        chosen = t.filter(pl.col("selected"))
        n, k = t.height, chosen.height
        diff = chosen["vqabq"] - chosen["score"]
        rows.append({
            "model": model, "split": split, "s1": s[0], "s2": s[1], "s3": s[2], "questions": n,
            "selected": k, "share_selected": k / n if n else float("nan"),
            "acc_mq": t["score"].mean(), "acc_vqabq": t["vqabq"].mean(),
            "acc_mq_selected": chosen["score"].mean() if k else None,
            "acc_vqabq_selected": chosen["vqabq"].mean() if k else None,
            "gained": int((diff > 0).sum()), "lost": int((diff < 0).sum()),
            "net_questions": float(diff.sum()),
        })  # fmt: skip
    return pl.DataFrame(rows, schema=TABLE_SCHEMA)


def tune_split(question_ids: Sequence[int], seed: int, share: float = 0.5) -> np.ndarray:
    """True for the questions the grid search tunes on: a seeded draw per question id."""
    draws = np.array([derive_seed(seed, "vqabq-tune", int(q)) % 1_000_000 for q in question_ids])
    return draws < share * 1_000_000


def grid_search(
    scores: pl.DataFrame,
    clean: pl.DataFrame,
    with_bq: pl.DataFrame,
    tune: np.ndarray,
    grid: Sequence[float] = GRID,
) -> tuple[float, float, float]:
    """The (s1, s2, s3) of ``grid`` with the largest mean VQABQ gain over models on the
    tuning questions (``tune``, aligned with ``scores``); ties: the strictest (largest)
    thresholds, so fewer MQs change."""
    part = scores.filter(pl.Series(tune))
    per_model = clean.join(with_bq, on=["model", "question_id"], suffix="_bq").select(
        "question_id", (pl.col("score_bq") - pl.col("score")).alias("gain")
    )
    mean_gain = per_model.group_by("question_id").agg(pl.col("gain").mean())
    gain = (
        part.join(mean_gain, on="question_id", how="left", maintain_order="left")["gain"]
        .fill_null(0.0)
        .to_numpy()
    )
    own = part["own"].to_numpy()
    v1 = part["score1"].to_numpy()
    v2 = part["ratio2"].fill_null(-np.inf).to_numpy()
    v3 = part["ratio3"].fill_null(-np.inf).to_numpy()
    best, best_t = -np.inf, (max(grid), max(grid), max(grid))
    for s1 in grid:
        m1 = own & (v1 >= s1)
        for s2 in grid:
            m2 = m1 & (v2 >= s2)
            for s3 in grid:
                total = float(gain[m2 & (v3 >= s3)].sum())
                if total > best + 1e-12 or (abs(total - best) <= 1e-12 and (s1, s2, s3) > best_t):
                    best, best_t = total, (s1, s2, s3)
    return best_t


def vqabq_tables(
    scored: pl.DataFrame,
    questions: pl.DataFrame,
    rankings: pl.DataFrame,
    ranker: str,
    setting: str | Sequence[float] = PAPER_THRESHOLDS,
    grid: bool = False,
    tune_share: float = 0.5,
    seed: int = 0,
) -> dict[str, pl.DataFrame]:
    """The VQABQ tables of a run from its scored predictions (model, perturbation,
    severity, question_id, score) and ``ranker``'s rankings: ``vqabq_scores`` (Table 5,
    with the thresholds used), ``vqabq_selection`` (per question) and ``vqabq`` (Tables
    6-7, split ``all``; with ``grid``, also the tuned and the configured thresholds on
    the held-out half, splits ``held_out_tuned`` and ``held_out_given``)."""
    scores = top3(rankings, questions)
    stats = score_statistics(scores)
    s = thresholds(setting, stats)
    chosen = select(scores, s)
    selection = scores.with_columns(chosen)
    clean = scored.filter(pl.col("perturbation") == "clean").select("model", "question_id", "score")
    # A generative model's answers with basic questions are its chain-of-questions
    # subset's; a classifier's, the ranker's level 1 (the MQ, then its basic questions).
    chain = scored.filter(pl.col("perturbation") == CHAIN).select("model", "question_id", "score")
    level1 = scored.filter(pl.col("perturbation") == ranker, pl.col("severity") == 1).select(
        "model", "question_id", "score"
    )
    with_bq = pl.concat(
        [chain, level1.filter(~pl.col("model").is_in(chain["model"].unique().to_list()))]
    )
    if not with_bq.height:
        raise ValueError(f"VQABQ needs the predictions on {ranker} level 1 (its ranker's "
                         "MQ + top three basic questions)")  # fmt: skip
    tables = [accuracy_table(clean, with_bq, selection.select("question_id", "selected"), s)]
    stats = stats.with_columns(
        pl.Series("threshold", list(s)),
        pl.lit("auto" if setting == "auto" else "given").alias("thresholds"),
    )
    if grid:
        tune = tune_split(scores["question_id"].to_list(), seed, tune_share)
        tuned = grid_search(scores, clean, with_bq, tune)
        held = scores.filter(pl.Series(~tune))
        for t, split in ((tuned, "held_out_tuned"), (s, "held_out_given")):
            sel = held.with_columns(select(held, t)).select("question_id", "selected")
            tables.append(accuracy_table(clean, with_bq, sel, t, split))
        selection = selection.with_columns(pl.Series("tune", tune))
    return {"vqabq_scores": stats, "vqabq_selection": selection, "vqabq": pl.concat(tables)}

"""VQABQ, the basic-question paper's second half: answer a main question (MQ) together
with its top basic questions, but only those close enough (its Algorithm 1).

Per MQ the top three basic questions of one ranker (default ``bq_lasso``) have scores
score1 >= score2 >= score3. Algorithm 1 as its authors' code runs it (the IVUL-KAUST
VQABQ repository; docs/text.md, "VQABQ"): the first basic question is appended when
score1 > s1, then the second when score2 / score1 > s2, then the third when score3 /
score2 > s3, each step only after the one before it, with strict comparisons; so an MQ
keeps 0, 1, 2 or 3 basic questions (``n_bq``). Only a rank with a positive score of the
ranker's own counts: the chain stops at a non-positive score or at a fill (a rank whose
``source`` is not the ranker's own, e.g. LASSO's cosine fill). The thresholds default to
(0.60, 0.58, 0.41) (``PAPER_THRESHOLDS``; ``auto``: avg - std of each quantity). An MQ
with n basic questions is answered with the MQ followed by its first n (the paper's
"direct concatenation"; a generative or chat model is asked the basic questions first,
then the MQ, through its ``chain_prompt``): the chain subset ``vqabq_chain`` at severity
n, run for every model; an MQ with none keeps its clean answer. Tables (the paper's
Tables 5-7): the score statistics and thresholds, how many MQs keep 0, 1, 2 and 3 basic
questions, and per model accuracy MQ-only vs VQABQ over all MQs and over those with
basic questions, and the questions gained and lost.

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
    questions' scores of ``rankings`` (one ranker), their ratios, whether each rank is
    the ranker's own score (``own1``..``own3``) and whether all three are (``own``)."""
    names = rankings["ranker"].unique().to_list()
    if len(names) != 1:
        raise ValueError(f"VQABQ reads one ranker's rankings, got {names}")
    from vqarobust.text.ranking import ranker_name

    own_source = ranker_name(names[0])
    top = rankings.filter(pl.col("rank") <= 3).sort("question", "rank")
    wide = top.group_by("question", maintain_order=True).agg(
        *(pl.col("score").get(i).alias(f"score{i + 1}") for i in range(3)),
        *((pl.col("source").get(i) == own_source).alias(f"own{i + 1}") for i in range(3)),
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
        (pl.col("own1") & pl.col("own2") & pl.col("own3")).alias("own"),
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
            raise ValueError(
                "VQABQ thresholds 'auto' need at least two main questions whose "
                "top three basic questions carry the ranker's own scores"
            )
        return tuple(float(a - s) for a, s in zip(stats["avg"], stats["std"], strict=True))
    values = tuple(float(v) for v in setting)  # type: ignore[union-attr]
    if len(values) != 3:
        raise ValueError(f"VQABQ thresholds are (s1, s2, s3), got {values}")
    return values


def n_basic(scores: pl.DataFrame, s: Sequence[float]) -> pl.Series:
    """Algorithm 1: how many basic questions each MQ keeps (0..3), by the nested strict
    tests score1 > s1, score2/score1 > s2, score3/score2 > s3 on positive own scores."""
    s1, s2, s3 = s
    step1 = pl.col("own1") & (pl.col("score1") > 0) & (pl.col("score1") > s1)
    step2 = step1 & pl.col("own2") & (pl.col("score2") > 0) & (pl.col("ratio2") > s2)
    step3 = step2 & pl.col("own3") & (pl.col("score3") > 0) & (pl.col("ratio3") > s3)
    n = sum(step.fill_null(False).cast(pl.Int8) for step in (step1, step2, step3))
    return scores.select(n.alias("n_bq"))["n_bq"]


def select(scores: pl.DataFrame, s: Sequence[float]) -> pl.Series:
    """Whether Algorithm 1 keeps any basic question (``n_bq > 0``)."""
    return (n_basic(scores, s) > 0).alias("selected")


COUNT_SCHEMA = {
    "split": pl.String,
    "s1": pl.Float64,
    "s2": pl.Float64,
    "s3": pl.Float64,
    "n_bq": pl.Int8,
    "questions": pl.Int64,
    "share": pl.Float64,
}


def count_table(n_bq: pl.Series, s: Sequence[float], split: str = "all") -> pl.DataFrame:
    """How many MQs keep 0, 1, 2 and 3 basic questions (the paper's Table 6 counts)."""
    total = n_bq.len()
    counts = [int((n_bq == n).sum()) for n in range(4)]
    return pl.DataFrame(
        {
            "split": split,
            "s1": s[0],
            "s2": s[1],
            "s3": s[2],
            "n_bq": list(range(4)),
            "questions": counts,
            "share": [c / total if total else float("nan") for c in counts],
        },
        schema=COUNT_SCHEMA,
    )


TABLE_SCHEMA = {
    "model": pl.String,
    "split": pl.String,
    "s1": pl.Float64,
    "s2": pl.Float64,
    "s3": pl.Float64,
    "questions": pl.Int64,
    "selected": pl.Int64,
    "share_selected": pl.Float64,
    "acc_mq": pl.Float64,
    "acc_vqabq": pl.Float64,
    "acc_mq_selected": pl.Float64,
    "acc_vqabq_selected": pl.Float64,
    "gained": pl.Int64,
    "lost": pl.Int64,
    "net_questions": pl.Float64,
}


def accuracy_table(
    clean: pl.DataFrame,
    with_bq: pl.DataFrame,
    selected: pl.DataFrame,
    s: Sequence[float],
    split: str = "all",
) -> pl.DataFrame:
    """Per model (Tables 6-7): ``clean`` (model, question_id, score: the MQ alone) and
    ``with_bq`` (model, question_id, n_bq, score: the MQ followed by its first n_bq basic
    questions) over the questions of ``selected`` (question_id, n_bq). VQABQ's score is
    ``with_bq``'s at the MQ's n_bq and the clean one where n_bq = 0; ``selected`` counts
    the MQs with basic questions, gained / lost those whose score rose / fell,
    ``net_questions`` the summed change (questions' worth of accuracy)."""
    rows = []
    for model in sorted(set(clean["model"])):
        base = clean.filter(pl.col("model") == model).select("question_id", "score")
        bq = with_bq.filter(pl.col("model") == model).select(
            "question_id", pl.col("n_bq").cast(pl.Int8), pl.col("score").alias("bq_score")
        )
        t = (
            selected.with_columns(pl.col("n_bq").cast(pl.Int8))
            .join(base, on="question_id", how="inner")
            .join(bq, on=["question_id", "n_bq"], how="left")
        )
        missing = t.filter((pl.col("n_bq") > 0) & pl.col("bq_score").is_null()).height
        if missing:
            raise ValueError(
                f"{model}: {missing} selected questions have no answer with their basic questions"
            )
        t = t.with_columns(
            pl.when(pl.col("n_bq") > 0)
            .then(pl.col("bq_score"))
            .otherwise(pl.col("score"))
            .alias("vqabq")
        )
        chosen = t.filter(pl.col("n_bq") > 0)
        n, k = t.height, chosen.height
        diff = chosen["vqabq"] - chosen["score"]
        rows.append(
            {
                "model": model,
                "split": split,
                "s1": s[0],
                "s2": s[1],
                "s3": s[2],
                "questions": n,
                "selected": k,
                "share_selected": k / n if n else float("nan"),
                "acc_mq": t["score"].mean(),
                "acc_vqabq": t["vqabq"].mean(),
                "acc_mq_selected": chosen["score"].mean() if k else None,
                "acc_vqabq_selected": chosen["vqabq"].mean() if k else None,
                "gained": int((diff > 0).sum()),
                "lost": int((diff < 0).sum()),
                "net_questions": float(diff.sum()),
            }
        )
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
    gains = (
        clean.join(with_bq, on=["model", "question_id"], suffix="_bq")
        .group_by("question_id", "n_bq")
        .agg((pl.col("score_bq") - pl.col("score")).mean().alias("gain"))
    )  # mean over models
    # gain[i, n]: MQ i's mean gain with its first n basic questions (0 for n = 0).
    gain = np.zeros((part.height, 4))
    for n in (1, 2, 3):
        g = gains.filter(pl.col("n_bq") == n).select("question_id", "gain")
        gain[:, n] = (
            part.join(g, on="question_id", how="left", maintain_order="left")["gain"]
            .fill_null(0.0)
            .to_numpy()
        )
    rows = np.arange(part.height)

    def valid(i: int, ratio: str | None) -> np.ndarray:
        own = part[f"own{i}"].to_numpy() & (part[f"score{i}"].to_numpy() > 0)
        return own if ratio is None else own & part[ratio].is_not_null().to_numpy()

    v1, v2 = part["score1"].to_numpy(), part["ratio2"].fill_null(-np.inf).to_numpy()
    v3 = part["ratio3"].fill_null(-np.inf).to_numpy()
    ok1, ok2, ok3 = valid(1, None), valid(2, "ratio2"), valid(3, "ratio3")
    best, best_t = -np.inf, (max(grid), max(grid), max(grid))
    for s1 in grid:
        m1 = ok1 & (v1 > s1)
        for s2 in grid:
            m2 = m1 & ok2 & (v2 > s2)
            for s3 in grid:
                m3 = m2 & ok3 & (v3 > s3)
                n = m1.astype(int) + m2 + m3
                total = float(gain[rows, n].sum())
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
    severity, question_id, score; the chain subset ``vqabq_chain`` at severity n holds
    each model's answers with the first n basic questions) and ``ranker``'s rankings:
    ``vqabq_scores`` (Table 5, with the thresholds used), ``vqabq_selection`` (per
    question: its scores and ``n_bq``), ``vqabq_counts`` (MQs per number of basic
    questions) and ``vqabq`` (Tables 6-7, split ``all``; with ``grid``, also the tuned
    and the configured thresholds on the held-out half, splits ``held_out_tuned`` and
    ``held_out_given``)."""
    del ranker  # the chain subsets were built from its rankings
    scores = top3(rankings, questions)
    stats = score_statistics(scores)
    s = thresholds(setting, stats)
    n_bq = n_basic(scores, s)
    selection = scores.with_columns(n_bq, (n_bq > 0).alias("selected"))
    clean = scored.filter(pl.col("perturbation") == "clean").select("model", "question_id", "score")
    with_bq = scored.filter(pl.col("perturbation") == CHAIN).select(
        "model", "question_id", pl.col("severity").cast(pl.Int8).alias("n_bq"), "score"
    )
    if not with_bq.height:
        raise ValueError(
            f"VQABQ needs the predictions on {CHAIN} (each MQ followed by its "
            "first 1, 2 and 3 basic questions)"
        )
    sel = selection.select("question_id", "n_bq")
    tables = [accuracy_table(clean, with_bq, sel, s)]
    counts = [count_table(n_bq, s)]
    stats = stats.with_columns(
        pl.Series("threshold", list(s)),
        pl.lit("auto" if setting == "auto" else "given").alias("thresholds"),
    )
    if grid:
        tune = tune_split(scores["question_id"].to_list(), seed, tune_share)
        tuned = grid_search(scores, clean, with_bq, tune)
        held = scores.filter(pl.Series(~tune))
        for t, split in ((tuned, "held_out_tuned"), (s, "held_out_given")):
            held_n = n_basic(held, t)
            part = held.select("question_id").with_columns(held_n)
            tables.append(accuracy_table(clean, with_bq, part, t, split))
            counts.append(count_table(held_n, t, split))
        selection = selection.with_columns(pl.Series("tune", tune))
    return {
        "vqabq_scores": stats,
        "vqabq_selection": selection,
        "vqabq_counts": pl.concat(counts),
        "vqabq": pl.concat(tables),
    }

"""The SwapMix paper's tables (docs/context.md): what each model reads and how it was
trained, reliance at several k (Table 2), and the comparisons its text draws.

* ``model_inputs``: per model, ``inputs`` (``pixels`` or the feature source's name),
  ``kind`` (``pixels``, ``detector``, ``gqa_h5``, ``obj36``, ``perfect_sight``) and
  ``training`` (``swapmix``, ``plain``, or ``checkpoint`` for a model the workflow did
  not train).
* ``context_reliance_k``: reliance per swap kind (and ``all``) using only the swaps of
  rank <= k of each object (the first k of the run's swaps of that kind, which are the
  swaps a run with that k makes).
* ``context_findings``: two comparisons of reliance over all swaps (with the paired
  bootstrap interval of the difference, from ``model_comparisons``): perfect sight vs
  detector features (the scenes' CNN or a released file) for models trained alike, and
  SwapMix vs plain training for models reading the same inputs. Each is made only where
  exactly one model fills each side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from vqarobust.features.gqa import RELEASED_KINDS
from vqarobust.metrics.context import RELIANCE_SCHEMA, context_tables
from vqarobust.metrics.uncertainty import family_note

INPUTS_SCHEMA = {"model": pl.String, "inputs": pl.String, "kind": pl.String, "training": pl.String}
# Feature kinds a detector makes (the scenes' CNN, GQA's and LXMERT's released files):
# the side perfect sight is compared with.
DETECTOR_KINDS = ("detector", *RELEASED_KINDS)
RELIANCE_K_SCHEMA = {**RELIANCE_SCHEMA, "k": pl.Int64}
FINDING_SCHEMA = {
    "finding": pl.String,
    "group": pl.String,
    "model_a": pl.String,
    "model_b": pl.String,
    "reliance_a": pl.Float64,
    "reliance_b": pl.Float64,
    "difference": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "p_adjusted": pl.Float64,
    "adjust": pl.String,
    "family_size": pl.Int64,
    "distinguishable": pl.Boolean,
}


def model_inputs(
    models: Mapping[str, Mapping[str, Any]], features: Mapping[str, Mapping[str, Any]]
) -> pl.DataFrame:
    """What each configured model reads and how it was trained."""
    rows = []
    for name, entry in models.items():
        source = entry.get("features")
        train = entry.get("train")
        training = "checkpoint" if train is None else "swapmix" if train.get("swapmix") else "plain"
        rows.append(
            {
                "model": name,
                "inputs": source or "pixels",
                "kind": features[source]["kind"] if source else "pixels",
                "training": training,
            }
        )
    return pl.DataFrame(rows, schema=INPUTS_SCHEMA).sort("model")


def reliance_at_k(scored: pl.DataFrame, ranks: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """Context reliance from the swaps of rank <= k, for each k of ``ks``.

    ``ranks`` has model, question_id, perturbation, severity and rank: each context
    prediction's swap rank (from the swap table of the inputs the model reads)."""
    context = scored.filter(pl.col("modality") == "context")
    if context.is_empty() or not ks:
        return pl.DataFrame(schema=RELIANCE_K_SCHEMA)
    ranked = context.join(
        ranks, on=["model", "question_id", "perturbation", "severity"], how="left"
    )
    unranked = ranked.filter(pl.col("rank").is_null()).height
    if unranked:
        raise ValueError(f"{unranked} context predictions have no swap in their model's swap table")
    clean = scored.filter(pl.col("modality") == "clean")
    parts = []
    for k in sorted(set(ks)):
        subset = pl.concat(
            [clean, ranked.filter(pl.col("rank") <= k).drop("rank")], how="diagonal_relaxed"
        )
        parts.append(context_tables(subset)["context_reliance"].with_columns(pl.lit(k).alias("k")))
    return pl.concat(parts).cast(RELIANCE_K_SCHEMA).sort("model", "perturbation", "k")


def _difference(comparisons: pl.DataFrame, a: str, b: str) -> dict[str, Any] | None:
    """reliance(a) - reliance(b) over all swaps, with its interval (either pair order)."""
    rows = comparisons.filter(
        pl.col("modality") == "context", pl.col("metric") == "context_reliance"
    )
    for x, y, sign in ((a, b, 1.0), (b, a, -1.0)):
        hit = rows.filter(pl.col("model_a") == x, pl.col("model_b") == y)
        if hit.height:
            r = hit.row(0, named=True)
            # + 0.0: no "-0.000" where a sign flip meets a zero.
            low, high = sorted((sign * r["low"] + 0.0, sign * r["high"] + 0.0))
            return {
                "difference": sign * r["difference"] + 0.0,
                "low": low,
                "high": high,
                **{k: r[k] for k in ("p_adjusted", "adjust", "family_size", "distinguishable")},
            }
    return None


def context_findings(
    inputs: pl.DataFrame, reliance: pl.DataFrame, comparisons: pl.DataFrame
) -> pl.DataFrame:
    """Perfect sight vs detector (per training), SwapMix vs plain (per inputs): reliance
    over all swaps of the two models and the interval of their difference (a - b)."""
    overall = {
        r["model"]: r["reliance"]
        for r in reliance.filter(pl.col("perturbation") == "all").iter_rows(named=True)
    }
    table = inputs.filter(pl.col("model").is_in(list(overall)))
    rows = []

    def one(frame: pl.DataFrame) -> str | None:
        return frame["model"][0] if frame.height == 1 else None

    def add(finding: str, group: str, a: str | None, b: str | None) -> None:
        if a is None or b is None:
            return
        diff = _difference(comparisons, a, b) or {
            "difference": overall[a] - overall[b],
            "low": None,
            "high": None,
            "p_adjusted": None,
            "adjust": None,
            "family_size": None,
            "distinguishable": None,
        }
        rows.append(
            {
                "finding": finding,
                "group": group,
                "model_a": a,
                "model_b": b,
                "reliance_a": overall[a],
                "reliance_b": overall[b],
                **diff,
            }
        )

    for training in ("plain", "swapmix"):
        same = table.filter(pl.col("training") == training)
        add(
            "perfect_sight_vs_detector",
            training,
            one(same.filter(pl.col("kind") == "perfect_sight")),
            one(same.filter(pl.col("kind").is_in(DETECTOR_KINDS))),
        )
    for source in table["inputs"].unique().sort().to_list():
        same = table.filter(pl.col("inputs") == source)
        add(
            "swapmix_vs_plain",
            source,
            one(same.filter(pl.col("training") == "swapmix")),
            one(same.filter(pl.col("training") == "plain")),
        )
    return pl.DataFrame(rows, schema=FINDING_SCHEMA)


def finding_sentence(row: Mapping[str, Any]) -> str:
    """One finding in words, true of its row."""
    a, b = row["reliance_a"], row["reliance_b"]
    if row["low"] is None:
        interval = " (no interval: the run has no bootstrap resamples)"
        settled = ""
    else:
        interval = (
            f" (difference {row['difference']:+.3f}, interval "
            f"[{row['low']:+.3f}, {row['high']:+.3f}])"
        )
        note = family_note(row, "context reliance")
        settled = (
            f"; {note}"
            if row["distinguishable"]
            else f"; {note}, so the run cannot tell them apart"
        )
    relies = (
        "relies less on context than"
        if a < b
        else "relies more on context than"
        if a > b
        else "relies on context as much as"
    )
    if row["finding"] == "perfect_sight_vs_detector":
        training = {"swapmix": "SwapMix"}.get(row["group"], row["group"])
        head = (
            f"With {training} training, perfect sight ({row['model_a']}) {relies} "
            f"detector features ({row['model_b']}): reliance {a:.3f} vs {b:.3f}"
        )
    else:
        change = "lowers" if a < b else "raises" if a > b else "does not change"
        head = (
            f"SwapMix training {change} the context reliance of the models reading "
            f"{row['group']}: "
            f"{row['model_a']} {a:.3f} vs {row['model_b']} {b:.3f}"
        )
    return head + interval + settled + "."


def paper_table1(
    inputs: pl.DataFrame, reliance: pl.DataFrame, effective: pl.DataFrame
) -> pl.DataFrame:
    """The paper's Table 1 layout: per model, what it reads and its training, clean
    accuracy, context reliance and effective accuracy over all swaps (with ``low`` and
    ``high`` interval columns where the tables carry them)."""

    def part(frame: pl.DataFrame, value: str, name: str) -> pl.DataFrame:
        cols = [pl.col(value).alias(name)]
        if "low" in frame.columns:
            cols += [pl.col("low").alias(f"{name}_low"), pl.col("high").alias(f"{name}_high")]
        return frame.filter(pl.col("perturbation") == "all").select("model", *cols)

    accuracy = effective.filter(pl.col("perturbation") == "all").select("model", "accuracy")
    return (
        inputs.select("model", "kind", "training")
        .join(accuracy, on="model")
        .join(part(reliance, "reliance", "context_reliance"), on="model", how="left")
        .join(part(effective, "effective_accuracy", "effective_accuracy"), on="model", how="left")
        .sort("kind", "training", "model")
    )


def paper_table2(inputs: pl.DataFrame, reliance_k: pl.DataFrame) -> pl.DataFrame:
    """The paper's Table 2 layout: per model, class and attribute reliance at each k."""
    kinds = {"swap_class": "class", "swap_attribute": "attribute"}
    rows = reliance_k.filter(pl.col("perturbation").is_in(list(kinds))).with_columns(
        (
            pl.col("perturbation").replace_strict(kinds)
            + pl.lit(" k=")
            + pl.col("k").cast(pl.String)
        ).alias("column")
    )
    if rows.is_empty():
        return inputs.select("model", "kind", "training").clear()
    order = [f"{kinds[p]} k={k}" for k in sorted(set(rows["k"])) for p in kinds]
    wide = rows.pivot(on="column", index="model", values="reliance")
    wide = wide.select("model", *[c for c in order if c in wide.columns])
    return (
        inputs.select("model", "kind", "training")
        .join(wide, on="model")
        .sort("kind", "training", "model")
    )

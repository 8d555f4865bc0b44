"""The "Summary" section: the reading in words, the headline table with intervals, the
blank-image caveat and the skipped images."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from vqarobust.corruptions import image_removing_controls
from vqarobust.metrics.image_reliance import IMAGE_RELIANCE_RATIO
from vqarobust.report.sections.base import Data, Run, Section
from vqarobust.report.sections.uncertainty import comparison_sentences, interval_note
from vqarobust.sql import literal
from vqarobust.summary import (
    NO_IMAGE_SIDE,
    Summary,
    bounds,
    headline_table,
    wide,
    with_interval,
)

# The opening names this many of the strongest and weakest corruptions (at most half).
N_NAMED = 3
# Skipped images named in the warning; the CSV holds every one.
N_SKIPPED_LISTED = 20


def _without_image(column: str) -> str:
    """SQL true where ``column`` names a control that takes the image away (by tag)."""
    names = ", ".join(literal(n) for n in image_removing_controls())
    return f"list_contains([{names}]::VARCHAR[], {column})"


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """The blank-image control per model and the skipped images."""
    del run
    return {
        "reliance": con.sql(
            "SELECT model, control_accuracy, ratio, uses_image_little FROM image_reliance "
            f"WHERE {_without_image('control')} ORDER BY model, control"
        ).pl(),
        "skipped": con.sql("SELECT * FROM skipped_images ORDER BY image_id").pl(),
    }


def summary(con: duckdb.DuckDBPyConnection) -> Data:
    """The headline :class:`~vqarobust.summary.Summary` fields: per model clean and mean
    corrupted accuracy, relative drop, VRE and the stability of its rank; per corruption
    VRE and aggregated drop (strongest first); the dataset's size and metric; the
    blank-image control; with one model its unscaled sub-metrics."""
    models = con.sql(
        f"""WITH m AS (
               SELECT v.model, v.clean_accuracy AS clean, c.corrupted,
                      CASE WHEN v.clean_accuracy > 0
                           THEN (v.clean_accuracy - c.corrupted) / v.clean_accuracy
                           ELSE 0 END AS relative_drop,
                      v.vre, rank() OVER (ORDER BY v.vre) AS rank
               FROM vre_model v JOIN (
                   SELECT model, avg(accuracy) AS corrupted FROM (
                       SELECT model, perturbation, avg(accuracy) AS accuracy FROM accuracy
                       WHERE severity > 0 AND modality = 'image' AND perturbation IN (
                           SELECT perturbation FROM vre_perturbation WHERE modality = 'image')
                       GROUP BY model, perturbation)
                   GROUP BY model) c USING (model)
               WHERE v.modality = 'image')
           SELECT m.*, s.share AS rank_share,
                  a.low AS clean_low, a.high AS clean_high,
                  p.low AS corrupted_low, p.high AS corrupted_high,
                  d.low AS relative_drop_low, d.high AS relative_drop_high,
                  r.low AS vre_low, r.high AS vre_high
           FROM m
           {bounds("a", "accuracy", "a.model = m.model AND a.modality = 'clean'")}
           {bounds("p", "perturbed_accuracy", "p.model = m.model AND p.modality = 'image'")}
           {bounds("d", "mmi", "d.model = m.model AND d.modality = 'image' AND d.key = 'all'")}
           {bounds("r", "vre_model", "r.model = m.model AND r.modality = 'image'")}
           LEFT JOIN rank_stability s
             ON s.modality = 'image' AND s.model = m.model AND s.rank = m.rank
           ORDER BY m.vre, m.model"""
    ).pl()
    corruptions = con.sql(
        f"""SELECT c.perturbation, c.vre, r.low AS vre_low, r.high AS vre_high,
                  c.relative_drop AS aggregated_drop
           FROM vre_perturbation c
           {
            bounds(
                "r", "vre_perturbation", "r.modality = 'image' AND r.perturbation = c.perturbation"
            )
        }
           WHERE c.modality = 'image' ORDER BY c.vre DESC, c.perturbation"""
    ).pl()
    n_images, n_questions = con.execute(
        "SELECT count(DISTINCT image_id), count(*) FROM questions"
    ).fetchall()[0]
    metric = con.execute("SELECT value FROM run_info WHERE key = 'metric'").fetchall()[0][0]
    reliance = con.sql(
        f"""SELECT r.model, r.ratio, i.low AS ratio_low, i.high AS ratio_high,
                   r.uses_image_little
            FROM image_reliance r
            {
            bounds("i", "image_reliance_ratio", "i.model = r.model AND i.perturbation = r.control")
        }
            WHERE {_without_image("r.control")} ORDER BY r.model, r.control"""
    ).pl()
    return {
        "models": models,
        "corruptions": corruptions,
        "n_images": n_images,
        "n_questions": n_questions,
        "metric": metric,
        "reliance": reliance,
        "unscaled": unscaled_submetrics(con) if models.height == 1 else None,
    }


def unscaled_submetrics(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The five sub-metrics, unscaled, per image corruption (one model), with bounds."""
    from vqarobust.metrics.robustness import METRIC_NAMES

    cols = ", ".join(METRIC_NAMES)
    long = con.sql(
        f"""WITH s AS (UNPIVOT (SELECT perturbation, {cols} FROM submetrics
                                WHERE modality = 'image')
                       ON {cols} INTO NAME col VALUE v)
            SELECT s.perturbation AS model, s.col, 0 AS k, s.v, i.low, i.high
            FROM s LEFT JOIN intervals i
              ON i.metric = s.col AND i.modality = 'image' AND i.perturbation = s.perturbation"""
    ).pl()
    per_perturbation = wide(long).rename({"model": "perturbation"})
    order = [c for name in METRIC_NAMES for c in (name, f"{name}_low", f"{name}_high")]
    return per_perturbation.select("perturbation", *order)


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """``skipped_images.csv``."""
    return {"skipped_images": data["skipped"]}


def reliance_sentence(reliance: pl.DataFrame | None, threshold: float) -> str | None:
    """The blank-image caveat: which models answer mostly without the image. ``reliance``:
    table ``image_reliance`` at the blank control (model, ratio, uses_image_little) with
    the ratio's bounds (ratio_low, ratio_high); ``threshold`` the ratio from which a
    model counts as using the image little."""
    if reliance is None or reliance.is_empty():
        return None
    little = reliance.filter(pl.col("uses_image_little"))
    if little.is_empty():
        return (
            f"Every model loses more than {1 - threshold:.0%} of its clean accuracy "
            "without the image (blank control)."
        )

    def share(r: float, lo: float | None, hi: float | None) -> str:
        return f"{r:.0%}" if lo is None or hi is None else f"{r:.0%} [{lo:.0%}, {hi:.0%}]"

    rows = little.select("model", "ratio", "ratio_low", "ratio_high").iter_rows()
    items = ", ".join(f"{m} keeps {share(r, lo, hi)}" for m, r, lo, hi in rows)
    one = little.height == 1
    return (
        f"Image reliance: {items} of {'its' if one else 'their'} clean accuracy without the "
        f"image (blank control; threshold {threshold:.0%}), so {'its' if one else 'their'} "
        "low VRE means little use of the image, not robustness."
    )


def reading(s: Summary) -> str:
    """A plain-language paragraph from the summary numbers; it calls one model more robust
    than another only where their VRE difference is distinguishable (its adjusted p-value,
    table ``model_comparisons``)."""
    if s.models.is_empty():
        return NO_IMAGE_SIDE
    best = s.models.row(0, named=True)
    vre = with_interval(best["vre"], best["vre_low"], best["vre_high"])
    accuracy = (
        f"accuracy {best['clean']:.3f} clean and {best['corrupted']:.3f} on average "
        "over the corruptions at severities 1-5, a relative drop of "
        f"{best['relative_drop']:.1%}"
    )
    if s.models.height < 2:
        text = [
            f"{best['model']}: {accuracy}. With one model VRE weighs only the corruptions "
            "against each other, so no model VRE is given (its unscaled sub-metrics are "
            "in the summary and the tables)."
        ]
    else:
        text = [f"{best['model']} has the lowest VRE ({vre}; {accuracy})."]
    text += comparison_sentences(s.models, s.comparisons, s.level)
    caveat = reliance_sentence(s.reliance, IMAGE_RELIANCE_RATIO)
    if caveat and not caveat.startswith("Every"):
        text.append(caveat)
    strong, weak = s.corruptions.row(0, named=True), s.corruptions.row(-1, named=True)
    text.append(
        f"The strongest corruption is {strong['perturbation']} (VRE "
        f"{with_interval(strong['vre'], strong['vre_low'], strong['vre_high'])}; severity-"
        f"aggregated drop A_rel {strong['aggregated_drop']:.1%} over the models, severities "
        f"0-5 as in the paper); the weakest is {weak['perturbation']} (VRE "
        f"{with_interval(weak['vre'], weak['vre_low'], weak['vre_high'])})."
    )
    return " ".join(text)


def context(data: Data, run: Run) -> dict[str, Any]:
    """The page's opening: the reading, the headline table, image reliance, skips."""
    summary, reliance, info = run.summary, data["reliance"], run.info
    headline = headline_table(summary)
    models = headline.join(
        reliance.select(
            "model", pl.col("control_accuracy").alias("accuracy without the image (blank)")
        ),
        on="model",
        how="left",
    )
    models = models.select(
        *headline.columns[:2], "accuracy without the image (blank)", *headline.columns[2:]
    )
    k = min(N_NAMED, max(1, summary.corruptions.height // 2))
    n_skipped = int(info.get("dataset.n_skipped_images", "0"))
    little = reliance.filter(pl.col("uses_image_little"))
    listed = data["skipped"].head(N_SKIPPED_LISTED).iter_rows()
    return {
        "reading": reading(summary),
        "image_side": not summary.models.is_empty(),
        "models": models,
        "interval_note": interval_note(summary),
        "level": summary.level,
        "strongest": ", ".join(summary.corruptions.head(k)["perturbation"]),
        "weakest": ", ".join(summary.corruptions.tail(k).reverse()["perturbation"]),
        "reliance": {
            "little": ", ".join(
                f"{m} ({r:.0%} of its clean accuracy without the image)"
                for m, r in little.select("model", "ratio").iter_rows()
            ),
            "n_little": little.height,
            "any": reliance.height > 0,
            "ratio": IMAGE_RELIANCE_RATIO,
        },
        "skipped": {
            "n": n_skipped,
            "n_questions": info.get("dataset.n_skipped_questions", "?"),
            "listed": ", ".join(f"{i} ({r})" for i, r in listed),
            "more": n_skipped > N_SKIPPED_LISTED,
        }
        if n_skipped
        else None,
    }


SECTION = Section(
    "summary",
    ("scoring", "accuracy", "robustness", "uncertainty"),
    context,
    read,
    tables=tables,
    summary=summary,
)

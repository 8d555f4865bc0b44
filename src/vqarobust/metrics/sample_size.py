"""How many images a study needs, planned from a pilot run (``vqarobust plan-size``).

Every interval of a run comes from one bootstrap over the images (docs/metrics.md): each
statistic's ``se`` in table ``intervals`` is the spread of its replicates, and each pair's
``se`` in ``model_comparisons`` is the spread of the *paired* difference, computed on the
same resamples for both models, so it holds the covariance between the two models' per-
image results. For a statistic that is a smooth function of per-image means, the standard
error falls as one over the square root of the number of images, so the pilot's per-image
standard deviation ``sd = se * sqrt(n_pilot)`` plans any size:

* the interval's half-width at ``n`` images is ``z * sd / sqrt(n)`` with ``z`` the normal
  quantile of the level, so a half-width ``h`` needs ``n = (z * sd / h)**2`` images;
* a paired difference of true size ``delta`` is found (its two-sided interval at the
  level excludes zero) with probability ``power`` at ``n = ((z + z_power) * sd_d /
  delta)**2`` images.

Both assume the pilot's images are drawn like the study's (same questions per image,
same models). ``vqarobust.metrics.simulation.check_plan`` draws datasets of the planned
sizes from a known truth and measures the half-width and power they reach.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import polars as pl
from scipy.stats import norm

# The summary's headline statistics: (label, intervals.metric, intervals.key). Clean
# accuracy is the clean side's; the others are per perturbed side (image, text, ...).
HEADLINE = (
    ("clean accuracy", "accuracy", None),
    ("mean perturbed accuracy", "perturbed_accuracy", None),
    ("relative drop", "mmi", "all"),
    ("VRE", "vre_model", None),
)
# model_comparisons.metric -> the intervals metric of each model's own value.
COMPARED = {
    "clean_accuracy": "accuracy",
    "perturbed_accuracy": "perturbed_accuracy",
    "vre": "vre_model",
}
# Below this many pilot images the standard error is itself too uncertain to plan from.
MIN_PILOT_IMAGES = 30


@dataclass(frozen=True)
class Target:
    """What the plan is for: a ``half_width`` of each statistic's interval at ``level``, and
    a paired difference of size ``detect`` found with probability ``power``."""

    half_width: float = 0.01
    detect: float = 0.01
    power: float = 0.8
    level: float = 0.95

    def __post_init__(self) -> None:
        for name in ("half_width", "detect"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("power", "level"):
            if not 0 < getattr(self, name) < 1:
                raise ValueError(f"{name} must be between 0 and 1, got {getattr(self, name)}")

    @property
    def z(self) -> float:
        """The two-sided normal quantile of ``level``."""
        return float(norm.ppf((1 + self.level) / 2))

    @property
    def z_power(self) -> float:
        return float(norm.ppf(self.power))


def images_for_half_width(se: float, n_pilot: int, target: Target) -> int | None:
    """Images at which a statistic of pilot standard error ``se`` over ``n_pilot`` images
    has an interval of half-width ``target.half_width``; None without spread."""
    if not se or not math.isfinite(se):
        return None
    sd = se * math.sqrt(n_pilot)
    return max(1, math.ceil((target.z * sd / target.half_width) ** 2))


def images_to_detect(se_difference: float, n_pilot: int, target: Target) -> int | None:
    """Images at which a paired difference of size ``target.detect`` is found with
    probability ``target.power``, from the pilot's standard error of the difference."""
    if not se_difference or not math.isfinite(se_difference):
        return None
    sd = se_difference * math.sqrt(n_pilot)
    return max(1, math.ceil(((target.z + target.z_power) * sd / target.detect) ** 2))


def pilot_images(con: duckdb.DuckDBPyConnection) -> int:
    """The number of images the run's bootstrap resampled (its ``questions`` table's)."""
    return int(con.execute("SELECT count(DISTINCT image_id) FROM questions").fetchall()[0][0])


def plan_statistics(intervals: pl.DataFrame, n_pilot: int, target: Target) -> pl.DataFrame:
    """Per model, side and headline statistic: the pilot's estimate, half-width and per-
    image standard deviation, and the images its interval needs for the target
    half-width (``intervals``: the run's table of that name)."""
    frames = []
    for order, (label, metric, key) in enumerate(HEADLINE):
        rows = intervals.filter(pl.col("metric") == metric)
        rows = rows.filter(pl.col("key") == key) if key else rows.filter(pl.col("key").is_null())
        if metric == "accuracy":
            rows = rows.filter(pl.col("modality") == "clean")
        frames.append(
            rows.with_columns(pl.lit(label).alias("statistic"), pl.lit(order).alias("order"))
        )
    rows = pl.concat(frames).filter(pl.col("se").is_not_null())
    return (
        rows.with_columns(
            ((pl.col("high") - pl.col("low")) / 2).alias("half_width"),
            (pl.col("se") * math.sqrt(n_pilot)).alias("sd_per_image"),
            pl.col("se")
            .map_elements(
                lambda s: images_for_half_width(s, n_pilot, target), return_dtype=pl.Int64
            )
            .alias("images_needed"),
        )
        .sort(pl.col("modality") != "clean", "modality", "order", "model")
        .select(
            "statistic",
            "modality",
            "model",
            "estimate",
            "half_width",
            "sd_per_image",
            "images_needed",
        )
    )


def plan_comparisons(
    comparisons: pl.DataFrame, intervals: pl.DataFrame, n_pilot: int, target: Target
) -> pl.DataFrame:
    """Per pair of models and compared statistic: the pilot's difference, the correlation
    between the two models' results over the images (from the three standard errors:
    ``var(a - b) = var a + var b - 2 cov``), and the images needed to find a difference of
    ``target.detect`` with ``target.power``."""
    # One row per (metric, side, model): accuracy only on the clean side.
    own = intervals.filter(
        pl.col("key").is_null(),
        pl.col("metric").is_in(list(COMPARED.values())),
        (pl.col("metric") != "accuracy") | (pl.col("modality") == "clean"),
    ).select("metric", "modality", "model", "se")
    if own.select("metric", "modality", "model").is_duplicated().any():
        raise ValueError("table intervals holds two rows of one model's compared statistic")
    rows = comparisons.with_columns(
        pl.col("metric").replace_strict(COMPARED, default=None).alias("own_metric")
    )
    for side in ("a", "b"):
        rows = rows.join(
            own.rename({"metric": "own_metric", "model": f"model_{side}", "se": f"se_{side}"}),
            on=["own_metric", "modality", f"model_{side}"],
            how="left",
        )
    corr = (pl.col("se_a") ** 2 + pl.col("se_b") ** 2 - pl.col("se") ** 2) / (
        2 * pl.col("se_a") * pl.col("se_b")
    )
    return (
        rows.with_columns(
            pl.when(pl.col("se_a") > 0, pl.col("se_b") > 0).then(corr).alias("correlation"),
            pl.col("se")
            .map_elements(lambda s: images_to_detect(s, n_pilot, target), return_dtype=pl.Int64)
            .alias("images_needed"),
        )
        .sort(pl.col("modality") != "clean", "modality", "metric", "model_a", "model_b")
        .select(
            "metric", "modality", "model_a", "model_b", "difference", "correlation", "images_needed"
        )
    )


@dataclass(frozen=True)
class Plan:
    """A pilot's plan: its size, the target, and the two tables."""

    n_pilot: int
    target: Target
    statistics: pl.DataFrame
    comparisons: pl.DataFrame


def plan_size(db_path: str, target: Target) -> Plan:
    """The plan for ``target`` from the results database of a pilot run."""
    with duckdb.connect(db_path, read_only=True) as con:
        n = pilot_images(con)
        intervals = con.sql("SELECT * FROM intervals").pl()
        comparisons = con.sql("SELECT * FROM model_comparisons").pl()
    if intervals.filter(pl.col("se").is_not_null()).height == 0:
        raise ValueError(
            f"{db_path}: the run has no intervals (uncertainty.resamples: 0); "
            "rerun the pilot with resamples to plan from it"
        )
    return Plan(
        n,
        target,
        plan_statistics(intervals, n, target),
        plan_comparisons(comparisons, intervals, n, target),
    )


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(df: pl.DataFrame, header: list[str]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.iter_rows()]
    return lines


def to_markdown(plan: Plan, command: str) -> str:
    """The plan as Markdown: what was assumed, then the two tables."""
    t = plan.target
    lines = [f"<!-- generated by `{command}`; do not edit by hand -->"]
    if plan.n_pilot < MIN_PILOT_IMAGES:
        lines.append(
            f"Warning: the pilot has {plan.n_pilot} images, fewer than "
            f"{MIN_PILOT_IMAGES}; its standard errors are too uncertain to plan "
            "from.\n"
        )
    lines += [
        f"Pilot: {plan.n_pilot:,} images. Images needed for a {t.level:.0%} interval of "
        f"half-width {t.half_width:g} (pilot standard error x sqrt(pilot images), scaled "
        "by one over the square root of the images):",
        "",
        *_table(
            plan.statistics,
            [
                "statistic",
                "side",
                "model",
                "pilot estimate",
                "pilot half-width",
                "sd per image",
                "images needed",
            ],
        ),
        "",
        f"Images needed to find a paired difference of {t.detect:g} between two models "
        f"with {t.power:.0%} power (two-sided, {t.level:.0%}); correlation: of the two "
        "models' results over the images, from the paired bootstrap:",
        "",
        *_table(
            plan.comparisons,
            [
                "statistic",
                "side",
                "model a",
                "model b",
                "pilot difference",
                "correlation",
                "images needed",
            ],
        ),
    ]
    return "\n".join(lines) + "\n"

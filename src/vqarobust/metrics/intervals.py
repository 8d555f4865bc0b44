"""Bootstrap intervals of every results table, comparisons of models, tests of drops and
effective robustness (docs/metrics.md, "Uncertainty").

:func:`uncertainty_tables` takes scored per-question predictions (the rows of the
``predictions`` table) and the questions, and returns the tables ``intervals``,
``model_comparisons``, ``rank_stability``, ``drop_tests`` and ``effective_robustness``.
Every statistic is computed from replicate arrays (replicate 0 = the data as observed,
1..B = resamples, :mod:`vqarobust.metrics.uncertainty`) by the same vectorized code as its
point estimate, so each interval's ``estimate`` equals the number in the table beside it.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from vqarobust.metrics.accuracy import SUBSET, TYPES, typed_sums
from vqarobust.metrics.context import context_arrays, context_flags, context_sums
from vqarobust.metrics.grouping import columns_of, group_means, with_rows
from vqarobust.metrics.image_reliance import reliance_ratio
from vqarobust.metrics.mmi import SCOPES, mmi_arrays, ratio_drop
from vqarobust.metrics.modalities import MMI_ALL, SINGLE_LEVEL_FAMILIES, VRE_MODALITIES
from vqarobust.metrics.robustness import (
    CLEAN,
    METRIC_NAMES,
    cube_layout,
    family_groups,
    softmax_weights,
    vre_arrays,
)
from vqarobust.metrics.rscore import (
    DEFAULT_MAXIMUM,
    DEFAULT_TOLERANCE,
    check_bounds,
    rscore_arrays,
)
from vqarobust.metrics.uncertainty import (
    INTERVAL_SCHEMA,
    MIN_FIT_POINTS,
    Encoding,
    Settings,
    adjust_p,
    bootstrap_p,
    chunked_intervals,
    cluster_index,
    cluster_sums,
    drop_tests,
    effective_robustness,
    encode_keys,
    interval_frame,
    rank_shares,
    replicate_weights,
    summarize,
)
from vqarobust.perturbations import OWN_TABLES

COMPARISON_SCHEMA = {
    "modality": pl.String,
    "metric": pl.String,
    "model_a": pl.String,
    "model_b": pl.String,
    "difference": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "se": pl.Float64,
    "p_value": pl.Float64,
    "p_adjusted": pl.Float64,
    "adjust": pl.String,
    "family_size": pl.Int64,
    "distinguishable": pl.Boolean,
}
RANK_SCHEMA = {"modality": pl.String, "model": pl.String, "rank": pl.Int64, "share": pl.Float64}
EFFECTIVE_SCHEMA = {
    "modality": pl.String,
    "perturbation": pl.String,
    "model": pl.String,
    "clean_accuracy": pl.Float64,
    "perturbed_accuracy": pl.Float64,
    "predicted": pl.Float64,
    "effective_robustness": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "se": pl.Float64,
    "intercept": pl.Float64,
    "slope": pl.Float64,
    "fitted_on": pl.String,
    "note": pl.String,
}


def _lookup(table: pl.DataFrame, value: str) -> pl.Expr:
    """``question_id`` -> ``value`` of ``table`` as a new column."""
    return (
        pl.col("question_id")
        .replace_strict(table["question_id"], table[value], return_dtype=pl.Int64)
        .alias(value)
    )


def _pairs(
    modality: str, metric: str, models: Sequence[str], values: np.ndarray, level: float
) -> list[dict]:
    """Differences a - b of every pair of models (columns of ``values``), each with its
    interval and unadjusted bootstrap p-value (:func:`adjust_comparisons` decides)."""
    rows = []
    for i, j in itertools.combinations(range(len(models)), 2):
        diff = values[:, i] - values[:, j]
        s = summarize(diff, level)
        rows.append(
            {
                "modality": modality,
                "metric": metric,
                "model_a": models[i],
                "model_b": models[j],
                "difference": float(s["estimate"]),
                "low": float(s["low"]),
                "high": float(s["high"]),
                "se": float(s["se"]),
                "p_value": bootstrap_p(diff),
            }
        )
    return rows


def adjust_comparisons(rows: Sequence[Mapping], level: float, adjust: str) -> pl.DataFrame:
    """The ``model_comparisons`` table: each family of comparisons, the pairs of one metric
    on one side (modality), adjusted together (``adjust``: Holm by default, the rule of the
    drop tests too); ``distinguishable`` where the adjusted p-value is below ``1 - level``.
    ``family_size`` is how many comparisons the family holds."""
    table = pl.DataFrame(
        rows,
        schema={
            k: v
            for k, v in COMPARISON_SCHEMA.items()
            if k not in ("p_adjusted", "adjust", "family_size", "distinguishable")
        },
    )
    parts = []
    for _, part in table.group_by("modality", "metric", maintain_order=True):
        p = part["p_value"].to_numpy()
        known = ~np.isnan(p)
        adjusted = np.full(p.shape, np.nan)
        adjusted[known] = adjust_p(p[known], adjust)
        parts.append(
            part.with_columns(
                pl.Series("p_adjusted", adjusted),
                pl.lit(adjust).alias("adjust"),
                pl.lit(part.height, pl.Int64).alias("family_size"),
                pl.Series("distinguishable", np.nan_to_num(adjusted, nan=1.0) < 1 - level),
            )
        )
    if not parts:
        return pl.DataFrame(schema=COMPARISON_SCHEMA)
    return pl.concat(parts).select(list(COMPARISON_SCHEMA)).cast(COMPARISON_SCHEMA)


class _Builder:
    """Collects interval rows and comparisons while the metrics are computed."""

    def __init__(self, level: float, adjust: str = "holm", reference: Sequence[str] = ()) -> None:
        self.level, self.adjust, self.reference = level, adjust, tuple(reference)
        self.intervals: list[pl.DataFrame] = []
        self.comparisons: list[dict] = []
        self.ranks: list[dict] = []
        self.effective_fit: list[pl.DataFrame] = []

    def add(self, metric: str, labels: pl.DataFrame, values: np.ndarray) -> None:
        self.intervals.append(interval_frame(metric, labels, values, self.level))


def uncertainty_tables(
    scored: pl.DataFrame,
    questions: pl.DataFrame,
    settings: Settings | None = None,
    weights: Mapping[str, float] | None = None,
    families: Mapping[str, str] | None = None,
    controls: Sequence[str] = (),
    rscore_tolerance: float = DEFAULT_TOLERANCE,
    rscore_maximum: float = DEFAULT_MAXIMUM,
) -> dict[str, pl.DataFrame]:
    """The uncertainty tables of a run (module doc) from scored per-question predictions
    (model, modality, perturbation, severity, question_id, answer, score) and the
    questions (question_id, image_id, question_type, answer_type).

    ``families`` and ``controls`` are those of :func:`vqarobust.db.build_database`
    (controls stay out of the robustness metrics, as there). With ``settings.resamples``
    0 only ``drop_tests`` and the point estimates of ``effective_robustness`` are filled.
    """
    settings = settings or Settings()
    check_bounds(rscore_tolerance, rscore_maximum)
    w = dict(weights) if weights is not None else softmax_weights()
    families = {p: f for p, f in (families or {}).items() if p not in set(controls)}
    tests = drop_tests(scored, exclude=controls, level=settings.level, adjust=settings.adjust)
    resamples = settings.resamples
    mapping, n_clusters = cluster_index(questions, settings.cluster)
    weights_ = replicate_weights(n_clusters, resamples, settings.seed)
    unknown = scored.join(mapping, on="question_id", how="anti")
    if unknown.height:
        raise ValueError(f"{unknown.height} predictions have no question row")
    # New columns only (a lookup, not a join): the big table's buffers stay shared.
    rows = scored.with_columns(_lookup(mapping, "cluster"))
    b = _Builder(settings.level, settings.adjust, settings.effective_reference)

    subsets = encode_keys(rows, SUBSET)  # shared by the accuracy per subset and per type
    acc_sums = cluster_sums(rows, subsets, ["score"], n_clusters).where(
        ~pl.col("modality").is_in(OWN_TABLES)
    )
    acc = acc_sums.means("score", weights_)
    keys = with_rows(acc_sums.keys)
    b.add("accuracy", acc_sums.keys, acc)
    if resamples:
        _typed_accuracy(b, rows, questions, subsets, n_clusters, weights_)

    models = sorted(keys["model"].unique().to_list())
    clean_rows = keys.filter(pl.col("modality") == CLEAN)
    no_clean = sorted(set(models) - set(clean_rows["model"]))
    if no_clean:
        raise ValueError(
            f"no clean predictions for models {no_clean}: every interval "
            "of a model is relative to its clean accuracy"
        )
    clean_labels, clean = group_means(acc, clean_rows, ["model"])
    clean_v = columns_of(clean_labels, clean, models)
    b.comparisons += _pairs(CLEAN, "clean_accuracy", models, clean_v, settings.level)
    metric_rows = keys.filter(~pl.col("perturbation").is_in(list(controls)))
    present = sorted(set(metric_rows["modality"].to_list()) - {CLEAN})

    perturbed_by_modality: dict[str, np.ndarray] = {}
    mmi_all: dict[str, tuple[pl.DataFrame, np.ndarray]] = {}
    base = _Base(acc, clean_labels, clean, clean_v, models)
    for modality in present:
        # The kernels' rows: the clean rows and this modality's perturbed ones.
        own = metric_rows.filter(pl.col("modality") == modality, pl.col("severity") > 0)
        rows_ = pl.concat([clean_rows, own])
        labels, pert = _perturbed(b, base, rows_, modality, families)
        mmi_all[modality] = (labels, pert)
        # Comparisons and the fit across models need every model on this side.
        if set(labels["model"]) == set(models):
            perturbed_by_modality[modality] = columns_of(labels, pert, models)
        _rscore(b, acc, rows_, modality, rscore_tolerance, rscore_maximum)
        if modality in VRE_MODALITIES:
            _vre(b, acc, metric_rows, families, modality, w, models)
    for modality, pert in perturbed_by_modality.items():
        b.comparisons += _pairs(modality, "perturbed_accuracy", models, pert, settings.level)
        _effective_overall(b, modality, clean_v, pert, models, settings.level)
    _across_modalities(b, base, mmi_all, metric_rows, present)
    _controls(b, base, keys, controls)
    _context(b, rows, n_clusters, weights_)
    return _tables(b, tests, resamples)


@dataclass(frozen=True)
class _Base:
    """What every relative metric divides by: the accuracy matrix (row 0 the data, the
    rest the resamples), each model's clean accuracy rows, and the run's models."""

    acc: np.ndarray
    clean_labels: pl.DataFrame
    clean: np.ndarray
    clean_v: np.ndarray
    models: list[str]

    def clean_of(self, labels: pl.DataFrame) -> np.ndarray:
        """The clean accuracy of each row's model in ``labels``."""
        return columns_of(self.clean_labels, self.clean, labels["model"].to_list())


def _typed_accuracy(
    b: _Builder,
    rows: pl.DataFrame,
    questions: pl.DataFrame,
    subsets: Encoding,
    n_clusters: int,
    weights: np.ndarray,
) -> None:
    """Intervals of the accuracy by question type and by answer type (the kernel of
    :mod:`vqarobust.metrics.accuracy`)."""
    for kind in TYPES:
        sums = typed_sums(rows, questions, kind, n_clusters, subsets).where(
            ~pl.col("modality").is_in(OWN_TABLES)
        )
        sums = sums.relabel(sums.keys.rename({kind: "key"}))
        b.intervals.extend(chunked_intervals(f"{kind}_accuracy", sums, "score", weights, b.level))


def _perturbed(
    b: _Builder, base: _Base, rows: pl.DataFrame, modality: str, families: Mapping[str, str]
) -> tuple[pl.DataFrame, np.ndarray]:
    """Perturbed accuracy and MMI of one modality per model x scope x group, by the MMI
    kernel (:func:`vqarobust.metrics.mmi.mmi_arrays`): a mean over the severities of each
    perturbation, then over the perturbations of the group (the multimodal paper's
    "ave"); scope all_sets keeps the plain mean over every perturbed set. Returns the
    labels and values of scope all."""
    m = mmi_arrays(base.acc, rows, families)
    for scope in SCOPES:
        labels, pert = m.perturbed[scope]
        lab = labels.select(
            "model",
            pl.lit(modality).alias("modality"),
            pl.col("group").alias("perturbation"),
            pl.lit(scope).alias("key"),
        )
        b.add("mmi", lab, m.mmi(scope))
        if scope == "all":
            b.add("perturbed_accuracy", lab.drop("perturbation", "key"), pert)
        if scope == "perturbation":
            _effective(b, modality, labels, pert, base.clean_v, base.models, b.level)
    return m.perturbed["all"]


def _across_modalities(
    b: _Builder,
    base: _Base,
    mmi_all: Mapping[str, tuple[pl.DataFrame, np.ndarray]],
    metric_rows: pl.DataFrame,
    present: Sequence[str],
) -> None:
    """MMI across modalities (scope "modality"): each modality whole, and image + text."""
    for modality, (labels, pert) in mmi_all.items():
        lab = labels.select(
            "model",
            pl.lit("all").alias("modality"),
            pl.lit(modality).alias("perturbation"),
            pl.lit("modality").alias("key"),
        )
        b.add("mmi", lab, ratio_drop(base.clean_of(labels), pert))
    if all(m in present for m in MMI_ALL):
        both = metric_rows.filter(
            (pl.col("modality") == CLEAN)
            | (pl.col("modality").is_in(list(MMI_ALL)) & (pl.col("severity") > 0))
        )
        # Perturbation names are unique per modality; both sides' names are kept apart.
        both = both.with_columns(
            pl.when(pl.col("modality") == CLEAN)
            .then(pl.col("perturbation"))
            .otherwise(pl.concat_str("modality", "perturbation", separator="/"))
            .alias("perturbation")
        )
        m = mmi_arrays(base.acc, both)
        labels = m.perturbed["all"][0]
        lab = labels.select(
            "model",
            pl.lit("all").alias("modality"),
            pl.lit("all").alias("perturbation"),
            pl.lit("modality").alias("key"),
        )
        b.add("mmi", lab, m.mmi("all"))


def _controls(b: _Builder, base: _Base, keys: pl.DataFrame, controls: Sequence[str]) -> None:
    """Each control's accuracy over the clean accuracy (the image-reliance ratio)."""
    for control in controls:
        ctl = keys.filter(pl.col("perturbation") == control)
        if ctl.height:
            labels, ctl_acc = group_means(base.acc, ctl, ["model"])
            lab = labels.with_columns(
                pl.lit("image").alias("modality"), pl.lit(control).alias("perturbation")
            )
            b.add("image_reliance_ratio", lab, reliance_ratio(ctl_acc, base.clean_of(labels)))


def _tables(b: _Builder, tests: pl.DataFrame, resamples: int) -> dict[str, pl.DataFrame]:
    intervals = pl.concat(b.intervals) if b.intervals else pl.DataFrame(schema=INTERVAL_SCHEMA)
    effective = intervals.filter(pl.col("metric") == "effective_robustness")
    intervals = intervals.filter(pl.col("metric") != "effective_robustness")
    eff_table = _effective_table(effective, b)
    if not resamples:
        intervals = intervals.clear()
        b.comparisons, b.ranks = [], []
    return {
        "intervals": intervals.sort(
            "metric", "model", "modality", "perturbation", "severity", "key", nulls_last=True
        ),
        "model_comparisons": adjust_comparisons(b.comparisons, b.level, b.adjust),
        "rank_stability": pl.DataFrame(b.ranks, schema=RANK_SCHEMA),
        "drop_tests": tests,
        "effective_robustness": eff_table,
    }


def _vre(
    b: _Builder,
    acc: np.ndarray,
    metric_rows: pl.DataFrame,
    families: Mapping[str, str],
    modality: str,
    weights: Mapping[str, float],
    models: Sequence[str],
) -> None:
    """VRE suite of one modality in every replicate, as :func:`modality_tables` builds it."""
    single = [p for p, f in families.items() if f in SINGLE_LEVEL_FAMILIES]
    table = metric_rows.filter(
        pl.col("modality").is_in([CLEAN, modality]), ~pl.col("perturbation").is_in(single)
    )
    if not table.filter(pl.col("severity") > 0).height:
        return
    with warnings.catch_warnings():
        # The point estimate has already reported every degenerate input.
        warnings.simplefilter("ignore")
        layout = cube_layout(table.with_columns(pl.Series("accuracy", acc[0, table["row"]])))
        cube = layout.fill(acc[:, table["row"].to_numpy()])
        groups = family_groups(layout.perturbations, families)
        arr = vre_arrays(cube, weights, groups)
    ms = pl.DataFrame({"model": layout.models, "modality": modality})
    cs = pl.DataFrame({"modality": modality, "perturbation": layout.perturbations})
    # Model-major, like the (model x perturbation) arrays.
    grid = ms.join(cs, on="modality", maintain_order="left_right")
    flat = (arr["vre_v"].shape[0], -1)
    b.add("vre_model", ms, arr["vre_v"])
    b.add("vre_perturbation", cs, arr["vre_c"])
    b.add("relative_drop_paper", ms, arr["rel_v"])
    b.add("relative_drop_paper", cs, arr["rel_c"])
    b.add("relative_drop_eq8", cs, arr["rel_c_eq8"])
    fs = ms.join(
        pl.DataFrame({"modality": modality, "perturbation": list(groups), "key": "family"}),
        on="modality",
        maintain_order="left_right",
    )
    b.add("vre_family", fs, arr["vre_f"].reshape(flat))
    b.add("relative_drop_family", fs, arr["rel_f"].reshape(flat))
    b.add("relative_drop_paper", grid, arr["rel_vc"].reshape(flat))
    for m in METRIC_NAMES:
        b.add(m, grid, arr[m].reshape(flat))
    vre = arr["vre_v"][:, [layout.models.index(m) for m in models if m in layout.models]]
    named = [m for m in models if m in layout.models]
    b.comparisons += _pairs(modality, "vre", named, vre, b.level)
    if vre.shape[0] > 1:
        shares = rank_shares(vre[1:])
        for i, model in enumerate(named):
            for r in range(len(named)):
                b.ranks.append(
                    {
                        "modality": modality,
                        "model": model,
                        "rank": r + 1,
                        "share": float(shares[i, r]),
                    }
                )


def _rscore(
    b: _Builder,
    acc: np.ndarray,
    rows: pl.DataFrame,
    modality: str,
    tolerance: float,
    maximum: float,
) -> None:
    """R_score per (model, perturbation, severity), per severity over all perturbations,
    its mean over the levels (the summary's per-ranker number) and the R_score of the
    mean deterioration, by the R_score kernel (:func:`vqarobust.metrics.rscore.rscore_arrays`)."""
    r = rscore_arrays(acc, rows, tolerance, maximum)
    lab = r.labels.with_columns(pl.lit(modality).alias("modality"))
    b.add("rscore", lab, r.rscore)
    mean_labels, mean = group_means(r.rscore, with_rows(lab), ["model", "modality", "perturbation"])
    b.add("rscore_mean", mean_labels, mean)
    overall = r.overall_labels.drop("levels")
    b.add("rscore_overall", overall.with_columns(pl.lit(modality).alias("modality")), r.overall)


def _effective(
    b: _Builder,
    modality: str,
    labels: pl.DataFrame,
    pert: np.ndarray,
    clean_v: np.ndarray,
    models: Sequence[str],
    level: float,
) -> None:
    """Effective robustness per perturbation of a modality (models with every one)."""
    for (p,), part in labels.with_row_index("i").group_by(["group"], maintain_order=True):
        if part.height != len(models):
            continue
        y = pert[:, part["i"].to_numpy()][:, [part["model"].to_list().index(m) for m in models]]
        _effective_overall(b, modality, clean_v, y, models, level, perturbation=str(p))


def _effective_overall(
    b: _Builder,
    modality: str,
    clean_v: np.ndarray,
    pert: np.ndarray,
    models: Sequence[str],
    level: float,
    perturbation: str = "all",
) -> None:
    """Each model's effective robustness out of sample (:func:`effective_robustness`, on
    ``b.reference`` or leave-one-model-out); a model its fit cannot cover gets a row that
    says why (``note``), on the ``all`` scope only."""
    unknown = sorted(set(b.reference) - set(models))
    if unknown:
        raise ValueError(
            f"uncertainty.effective_reference names models the run has not: "
            f"{unknown}; the run's models: {list(models)}"
        )
    mask = np.array([m in b.reference for m in models]) if b.reference else None
    fit = effective_robustness(clean_v, pert, mask)
    fitted = fit["fitted"]
    if not fitted.any() and perturbation != "all":
        return
    on = list(models) if mask is None else [m for m, r in zip(models, mask, strict=True) if r]
    lab = pl.DataFrame({"model": list(models), "modality": modality, "perturbation": perturbation})
    if fitted.any():
        b.add("effective_robustness", lab.filter(pl.Series(fitted)), fit["residual"][:, fitted])
    rows = []
    for j, model in enumerate(models):
        others = [m for m in on if m != model]
        rows.append(
            {
                "model": model,
                "modality": modality,
                "perturbation": perturbation,
                "clean_accuracy": clean_v[0, j],
                "perturbed_accuracy": pert[0, j],
                "predicted": fit["predicted"][0, j] if fitted[j] else None,
                "intercept": fit["intercept"][0, j] if fitted[j] else None,
                "slope": fit["slope"][0, j] if fitted[j] else None,
                "fitted_on": ", ".join(others) if fitted[j] else None,
                "note": None
                if fitted[j]
                else (
                    f"no fit: the line would rest on {len(others)} model"
                    f"{'' if len(others) == 1 else 's'} ({', '.join(others) or 'none'}); "
                    f"it needs {MIN_FIT_POINTS} besides the model it predicts"
                ),
            }
        )
    b.effective_fit.append(
        pl.DataFrame(
            rows,
            schema={
                k: v
                for k, v in EFFECTIVE_SCHEMA.items()
                if k not in ("effective_robustness", "low", "high", "se")
            },
        )
    )


def _effective_table(intervals: pl.DataFrame, b: _Builder) -> pl.DataFrame:
    fits = b.effective_fit
    if not fits:
        return pl.DataFrame(schema=EFFECTIVE_SCHEMA)
    fit = pl.concat(fits).unique(["modality", "perturbation", "model"], keep="first")
    table = fit.join(
        intervals.select(
            "model",
            "modality",
            "perturbation",
            pl.col("estimate").alias("effective_robustness"),
            "low",
            "high",
            "se",
        ),
        on=["model", "modality", "perturbation"],
        how="left",
    )
    return table.select([pl.col(c).cast(t) for c, t in EFFECTIVE_SCHEMA.items()]).sort(
        "modality", "perturbation", "model"
    )


def _context(b: _Builder, rows: pl.DataFrame, n_clusters: int, weights: np.ndarray) -> None:
    """Context reliance and effective accuracy (SwapMix) per model and perturbation, by
    the kernel of :func:`vqarobust.metrics.context.context_arrays`."""
    if rows.filter(pl.col("modality") == "context").is_empty():
        return
    flags = context_flags(rows.drop("cluster")).join(
        rows.filter(pl.col("modality") == "clean").select("model", "question_id", "cluster"),
        on=["model", "question_id"],
    )
    sums = context_sums(flags, n_clusters)
    labels = sums.keys.with_columns(pl.lit("context").alias("modality"))
    reliance, effective = context_arrays(sums, weights)
    b.add("context_reliance", labels, reliance)
    b.add("effective_accuracy", labels, effective)
    # Pairs of models over all swaps (e.g. a model and its SwapMix-trained twin).
    every = labels.with_row_index("i").filter(pl.col("perturbation") == "all")
    models = every["model"].to_list()
    idx = every["i"].to_numpy()
    for metric, values in (("context_reliance", reliance), ("effective_accuracy", effective)):
        b.comparisons += _pairs("context", metric, models, values[:, idx], b.level)

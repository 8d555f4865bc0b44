"""The visual robustness suite (docs/metrics.md): relative drops, five sub-metrics, VRE.

Input is a long accuracy table ``(model, perturbation, severity, accuracy)``; severity 0
is the clean accuracy, given once per model (perturbation ``"clean"``) or once per
(model, perturbation). Everything is computed on a (model x perturbation x severity) array.

Degenerate inputs get defined results and a :class:`RobustnessWarning`:

* a ratio whose denominator is zero (E0 = 0 in First-Drop, min E = 0 in Range of Error,
  A(v,0) = 0 in a relative drop) is 0 when its numerator is 0 too; otherwise it takes
  the largest finite value of that metric in the matrix (as bad as the worst observed),
  or 0 if there is none;
* a metric constant over the matrix (max = min, e.g. one model and one perturbation)
  scales to 0 everywhere;
* a missing severity is left out of the means, slope and range; First-Drop then uses
  the lowest severity present (a warning only when other models have that severity: one
  no model has was not asked for); a missing clean accuracy is an error.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from vqarobust.registry import Registry

CLEAN = "clean"
LEVELS = np.arange(6)


class RobustnessWarning(UserWarning):
    """A robustness metric met a degenerate input and used its documented fallback."""


@dataclass(frozen=True)
class SubMetric:
    """Metadata of a sub-metric, read by the DuckDB writer and the report."""

    name: str
    label: str
    higher_is_better: bool = False
    aggregation: str = "mean"


SUBMETRICS: Registry[SubMetric] = Registry("sub-metric")
for _m in (
    SubMetric("first_drop", "First-Drop F"),
    SubMetric("range_of_error", "Range of Error R"),
    SubMetric("error_rate", "Error Rate rho"),
    SubMetric("average_error", "Average Error mu"),
    SubMetric("corruption_error_diff", "Avg. Difference of Corruption Error Delta"),
):
    SUBMETRICS.register(_m.name)(_m)
METRIC_NAMES: tuple[str, ...] = (
    "first_drop",
    "range_of_error",
    "error_rate",
    "average_error",
    "corruption_error_diff",
)


def _warn(message: str) -> None:
    warnings.warn(message, RobustnessWarning, stacklevel=3)


@dataclass(frozen=True)
class AccuracyCube:
    """Accuracy as an array ``acc[model, perturbation, severity]`` (NaN where missing)."""

    models: list[str]
    perturbations: list[str]
    acc: np.ndarray


@dataclass(frozen=True)
class CubeLayout:
    """Where each row of a long accuracy table lands in the (model x perturbation x
    severity) cube: row ``row[k]`` fills cell ``(model[k], perturbation[k], severity[k])``.
    A clean row given once per model fills severity 0 of every perturbation of that model
    that has no severity-0 row of its own. The same layout serves the point estimate and
    every bootstrap replicate (:mod:`vqarobust.metrics.uncertainty`)."""

    models: list[str]
    perturbations: list[str]
    row: np.ndarray
    model: np.ndarray
    perturbation: np.ndarray
    severity: np.ndarray

    def fill(self, values: np.ndarray) -> np.ndarray:
        """The cube of ``values`` (shape (..., n_rows): one entry per table row), with the
        leading axes of ``values`` kept: (..., model, perturbation, severity)."""
        lead = values.shape[:-1]
        acc = np.full((*lead, len(self.models), len(self.perturbations), 6), np.nan)
        acc[..., self.model, self.perturbation, self.severity] = values[..., self.row]
        return acc


def cube_layout(table: pl.DataFrame) -> CubeLayout:
    """Validate a long accuracy table and say where each row goes in the cube."""
    required = {"model", "perturbation", "severity", "accuracy"}
    missing = required - set(table.columns)
    if missing:
        raise ValueError(f"accuracy table lacks columns {sorted(missing)}")
    df = table.select(
        pl.col("model").cast(pl.String),
        pl.col("perturbation").cast(pl.String),
        pl.col("severity").cast(pl.Int64),
        pl.col("accuracy").cast(pl.Float64),
    ).with_row_index("row")
    bad = df.filter(~pl.col("severity").is_between(0, 5) | ~pl.col("accuracy").is_between(0, 1))
    if bad.height:
        raise ValueError(f"severity must be 0..5 and accuracy in [0, 1]; offending rows:\n{bad}")
    bad = df.filter((pl.col("perturbation") == CLEAN) & (pl.col("severity") != 0))
    if bad.height:
        m, s = bad.row(0, named=True)["model"], bad.row(0, named=True)["severity"]
        raise ValueError(f"clean rows must have severity 0; model {m!r} has {s}")
    models = sorted(df["model"].unique().to_list())
    perturbations = sorted(c for c in df["perturbation"].unique().to_list() if c != CLEAN)
    if not perturbations:
        raise ValueError("accuracy table holds no corrupted rows (severity 1..5)")
    index = pl.DataFrame(
        {"perturbation": perturbations, "c": np.arange(len(perturbations))},
        schema={"perturbation": pl.String, "c": pl.Int64},
    )
    own = df.filter(pl.col("perturbation") != CLEAN).join(index, on="perturbation")
    # A model's clean row stands in for severity 0 of each perturbation without its own.
    clean = (
        df.filter(pl.col("perturbation") == CLEAN)
        .unique("model", keep="first", maintain_order=True)
        .drop("perturbation")
        .join(index, how="cross")
        .join(own.filter(pl.col("severity") == 0), on=["model", "c"], how="anti")
    )
    cells = pl.concat(
        [own.select("row", "model", "c", "severity"), clean.select("row", "model", "c", "severity")]
    )
    mi = {m: i for i, m in enumerate(models)}
    cells = cells.with_columns(pl.col("model").replace_strict(mi, return_dtype=pl.Int64))
    layout = CubeLayout(
        models,
        perturbations,
        cells["row"].to_numpy().astype(np.int64),
        cells["model"].to_numpy(),
        cells["c"].to_numpy(),
        cells["severity"].to_numpy(),
    )
    acc = layout.fill(df["accuracy"].to_numpy())
    no_clean = [models[i] for i in range(len(models)) if np.isnan(acc[i, :, 0]).any()]
    if no_clean:
        raise ValueError(f"no clean accuracy (severity 0) for models {no_clean}")
    # A severity no model has was not asked for (a chosen severity list, a one-level
    # perturbation): nothing to say. One that some models have and others lack is a hole.
    missing = np.isnan(acc[:, :, 1:])
    holes = np.argwhere(missing & ~missing.all(axis=0, keepdims=True))
    if len(holes):
        where = [f"{models[v]}/{perturbations[c]}/{s + 1}" for v, c, s in holes[:10]]
        _warn(f"{len(holes)} missing severities left out of the metrics, e.g. {where}")
    return layout


def accuracy_cube(table: pl.DataFrame) -> AccuracyCube:
    """Pivot a long accuracy table into an :class:`AccuracyCube`; validates the table."""
    layout = cube_layout(table)
    acc = layout.fill(table["accuracy"].cast(pl.Float64).to_numpy())
    return AccuracyCube(layout.models, layout.perturbations, acc)


def _matrix_axes(a: np.ndarray) -> tuple[int, ...]:
    # Axis 0 is the replicate (one matrix per bootstrap resample); the rest is the matrix.
    return tuple(range(1, a.ndim))


def _safe_ratio(num: np.ndarray, den: np.ndarray, what: str) -> np.ndarray:
    """num / den per replicate (axis 0); fallbacks per replicate's matrix (module doc)."""
    num, den = np.broadcast_arrays(np.asarray(num, float), np.asarray(den, float))
    zero = den == 0
    out = np.divide(num, den, out=np.zeros(num.shape), where=~zero)
    if zero.any():
        bad = zero & (num != 0) & ~np.isnan(num)
        finite = np.where(~zero & np.isfinite(out), out, -np.inf)
        worst = finite.max(axis=_matrix_axes(out), keepdims=True)
        worst = np.where(np.isneginf(worst), 0.0, worst)
        out = np.where(bad, worst, np.where(zero, 0.0, out))
        _warn(f"{what}: {int(zero.sum())} zero denominators (fallback {float(worst.max()):.4g})")
    out[np.isnan(num) | np.isnan(den)] = np.nan
    return out


def _slope(errors: np.ndarray) -> np.ndarray:
    """Least-squares slope of E against severity over the levels present, per cell."""
    present = ~np.isnan(errors)
    x = np.where(present, LEVELS, np.nan)
    xm = np.nanmean(x, axis=-1, keepdims=True)
    ym = np.nanmean(errors, axis=-1, keepdims=True)
    num = np.nansum((x - xm) * (errors - ym), axis=-1)
    den = np.nansum((x - xm) ** 2, axis=-1)
    return np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)


def _raw(acc: np.ndarray) -> dict[str, np.ndarray]:
    """The five sub-metrics of accuracy cubes (replicate, model, perturbation, severity)."""
    err = 1.0 - acc
    e0 = err[..., 0]
    corrupted = err[..., 1:]
    # First-Drop uses E1, or the lowest severity present when E1 is missing.
    first_idx = np.argmax(~np.isnan(corrupted), axis=-1)
    e_first = np.take_along_axis(corrupted, first_idx[..., None], axis=-1)[..., 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        e_max, e_min = np.nanmax(err, axis=-1), np.nanmin(err, axis=-1)
        return {
            "first_drop": _safe_ratio(e_first - e0, e0, "First-Drop (E0 = 0)"),
            "range_of_error": _safe_ratio(e_max - e_min, e_min, "Range of Error (min E = 0)"),
            "error_rate": _slope(err),
            "average_error": np.nanmean(err, axis=-1),
            "corruption_error_diff": np.nanmean(corrupted - e0[..., None], axis=-1),
        }


def raw_submetrics(cube: AccuracyCube) -> dict[str, np.ndarray]:
    """The five sub-metrics, each a (model x perturbation) array, before scaling."""
    return {k: v[0] for k, v in _raw(cube.acc[None]).items()}


def _scale(values: np.ndarray, name: str) -> np.ndarray:
    """Min-max scaling of each replicate's matrix (axis 0 = replicate)."""
    axes = _matrix_axes(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanmin(values, axis=axes, keepdims=True)
        hi = np.nanmax(values, axis=axes, keepdims=True)
    flat = ~(hi > lo)
    if flat.any():
        _warn(f"{name} is constant ({float(lo.flat[0]):.4g}) over the matrix; scaled to 0")
    span = np.where(flat, 1.0, hi - lo)
    return np.where(np.isnan(values), np.nan, np.where(flat, 0.0, (values - lo) / span))


def min_max_scale(values: np.ndarray, name: str = "metric") -> np.ndarray:
    """Scale to [0, 1] over the whole matrix; a constant metric scales to 0."""
    return _scale(np.asarray(values, float)[None], name)[0]


def softmax_weights(preferences: Mapping[str, float] | None = None) -> dict[str, float]:
    """Weights W = softmax(preference scores) over the five sub-metrics (default uniform)."""
    prefs = dict(preferences or {})
    unknown = set(prefs) - set(METRIC_NAMES)
    if unknown:
        raise ValueError(f"unknown sub-metrics in preferences: {sorted(unknown)}")
    scores = np.array([float(prefs.get(m, 0.0)) for m in METRIC_NAMES])
    w = np.exp(scores - scores.max())
    w /= w.sum()
    return dict(zip(METRIC_NAMES, w.tolist(), strict=True))


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Validate explicit weights: all five present, non-negative, summing to 1."""
    if set(weights) != set(METRIC_NAMES):
        raise ValueError(f"weights must name exactly {list(METRIC_NAMES)}, got {sorted(weights)}")
    w = {k: float(v) for k, v in weights.items()}
    if min(w.values()) < 0 or not np.isclose(sum(w.values()), 1.0):
        raise ValueError(f"weights must be >= 0 and sum to 1, got {w}")
    return w


def weight_sweep() -> dict[str, dict[str, float]]:
    """The report's weightings (docs/metrics.md): uniform, and each metric at 0.6 with the
    rest at 0.1."""
    sweep = {"uniform": {m: 0.2 for m in METRIC_NAMES}}
    for m in METRIC_NAMES:
        sweep[f"{m}_0.6"] = {k: (0.6 if k == m else 0.1) for k in METRIC_NAMES}
    return sweep


@dataclass(frozen=True)
class RobustnessTables:
    """The outputs of :func:`robustness_tables`, named as the DuckDB tables."""

    submetrics: pl.DataFrame
    vre_model: pl.DataFrame
    vre_perturbation: pl.DataFrame
    vre_sweep: pl.DataFrame
    vre_family: pl.DataFrame | None = None


def family_groups(
    perturbations: Sequence[str], families: Mapping[str, str] | None
) -> dict[str, list[int]]:
    """The column of each perturbation of ``perturbations`` per family (sorted; a perturbation
    ``families`` does not name is of family ``unknown``)."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(perturbations):
        groups.setdefault((families or {}).get(c, "unknown"), []).append(i)
    return dict(sorted(groups.items()))


def vre_arrays(
    acc: np.ndarray,
    weights: Mapping[str, float],
    groups: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """The VRE suite of accuracy cubes ``acc[replicate, model, perturbation, severity]``.

    Every statistic is computed per replicate (axis 0), the min-max scaling included, so
    a bootstrap resample goes through exactly the steps of the point estimate (which is
    the one replicate of the observed data). Keys: ``clean`` (replicate, model), ``a_vc``,
    ``rel_vc`` and each raw and ``{name}_scaled`` sub-metric (replicate, model,
    perturbation), ``a_v``, ``rel_v``, ``m_v.{name}``, ``vre_v`` (replicate, model) and
    ``a_c``, ``rel_c`` (the mean over models of ``rel_vc``, as the paper's tables),
    ``rel_c_eq8`` (the paper's Eq. 8, a ratio of sums over models), ``m_c.{name}``,
    ``vre_c`` (replicate, perturbation). With ``groups`` (a family's perturbation columns,
    :func:`family_groups`), per family: ``a_f`` and ``rel_f``, the means over its
    perturbations of ``a_vc`` and ``rel_vc``, and ``vre_f``, VRE with each scaled
    sub-metric averaged over its perturbations only (replicate, model, family).
    """
    a_clean = acc[:, :, 0, 0]  # per model; identical over perturbations when given once
    a_vc = np.nanmean(acc, axis=-1)
    a_v = a_vc.mean(axis=-1)
    a_c = a_vc.mean(axis=-2)
    out = {
        "clean": a_clean,
        "a_vc": a_vc,
        "a_v": a_v,
        "a_c": a_c,
        "rel_vc": _safe_ratio(acc[..., 0] - a_vc, acc[..., 0], "relative drop (A(v,0) = 0)"),
        "rel_v": _safe_ratio(a_clean - a_v, a_clean, "relative drop (A(v,0) = 0)"),
        "rel_c_eq8": _safe_ratio(
            (acc[..., 0] - a_vc).sum(axis=-2),
            acc[..., 0].sum(axis=-2),
            "relative drop of perturbation",
        ),
    }
    # The paper's Tables 1-2 print the mean over models of each model's drop, not its
    # Eq. 8 (a ratio of sums, which weighs a model by its clean accuracy); both are kept
    # (docs/metrics.md, docs/fidelity.md).
    out["rel_c"] = np.nanmean(out["rel_vc"], axis=-2)
    raw = _raw(acc)
    vre_v = np.zeros_like(a_v)
    vre_c = np.zeros_like(a_c)
    for m in METRIC_NAMES:
        scaled = _scale(raw[m], m)
        out[m], out[f"{m}_scaled"] = raw[m], scaled
        out[f"m_v.{m}"] = np.nanmean(scaled, axis=-1)
        out[f"m_c.{m}"] = np.nanmean(scaled, axis=-2)
        vre_v = vre_v + weights[m] * out[f"m_v.{m}"]
        vre_c = vre_c + weights[m] * out[f"m_c.{m}"]
    out["vre_v"], out["vre_c"] = vre_v, vre_c
    if groups is not None:
        # The scaling stays over the whole matrix: a family's VRE is comparable with
        # every other family's and with VRE(v).
        cols = list(groups.values())
        out["a_f"] = np.stack([a_vc[..., c].mean(axis=-1) for c in cols], axis=-1)
        out["rel_f"] = np.stack([np.nanmean(out["rel_vc"][..., c], axis=-1) for c in cols], axis=-1)
        vre_f = np.zeros_like(out["a_f"])
        for m in METRIC_NAMES:
            scaled = out[f"{m}_scaled"]
            vre_f = vre_f + weights[m] * np.stack(
                [np.nanmean(scaled[..., c], axis=-1) for c in cols], axis=-1
            )
        out["vre_f"] = vre_f
    return out


def robustness_tables(
    accuracy: pl.DataFrame,
    weights: Mapping[str, float] | None = None,
    on_missing: str = "error",
    families: Mapping[str, str] | None = None,
) -> RobustnessTables:
    """Compute the whole VRE suite from a long accuracy table; with ``families`` also
    ``vre_family`` (model x family: ``accuracy``, ``relative_drop``, ``vre`` over its
    perturbations, :func:`vre_arrays`).

    ``weights`` maps each sub-metric to its weight (default: uniform 0.2). A model
    without clean rows, or lacking a (perturbation, severity) another model has, is an
    error unless ``on_missing="drop"`` (:func:`vqarobust.metrics.coverage.check_coverage`).
    """
    from vqarobust.metrics.coverage import check_coverage  # it imports this module

    w = check_weights(weights) if weights is not None else softmax_weights()
    for column in ("model", "perturbation", "severity"):
        if column not in accuracy.columns:
            raise ValueError(f"accuracy table lacks columns ['{column}']")
    accuracy = check_coverage(accuracy, on_missing, "VRE")
    cube = accuracy_cube(accuracy)
    acc = cube.acc
    groups = family_groups(cube.perturbations, families) if families is not None else None
    a = {k: v[0] for k, v in vre_arrays(acc[None], w, groups).items()}
    m_v = {m: a[f"m_v.{m}"] for m in METRIC_NAMES}
    m_c = {m: a[f"m_c.{m}"] for m in METRIC_NAMES}

    v_idx, c_idx = np.meshgrid(
        range(len(cube.models)), range(len(cube.perturbations)), indexing="ij"
    )
    sub = pl.DataFrame(
        {
            "model": np.array(cube.models, dtype=object)[v_idx.ravel()].tolist(),
            "perturbation": np.array(cube.perturbations, dtype=object)[c_idx.ravel()].tolist(),
            "clean_accuracy": acc[..., 0].ravel(),
            "accuracy": a["a_vc"].ravel(),
            "relative_drop": a["rel_vc"].ravel(),
            **{m: a[m].ravel() for m in METRIC_NAMES},
            **{f"{m}_scaled": a[f"{m}_scaled"].ravel() for m in METRIC_NAMES},
        }
    )

    def vre(ms: dict[str, np.ndarray], weights_: Mapping[str, float]) -> np.ndarray:
        return sum(weights_[m] * ms[m] for m in METRIC_NAMES)

    vre_model = pl.DataFrame(
        {
            "model": cube.models,
            "clean_accuracy": a["clean"],
            "accuracy": a["a_v"],
            "relative_drop": a["rel_v"],
            **{m: m_v[m] for m in METRIC_NAMES},
            "vre": a["vre_v"],
        }
    )
    vre_perturbation = pl.DataFrame(
        {
            "perturbation": cube.perturbations,
            "accuracy": a["a_c"],
            "relative_drop": a["rel_c"],
            "relative_drop_eq8": a["rel_c_eq8"],
            **{m: m_c[m] for m in METRIC_NAMES},
            "vre": a["vre_c"],
        }
    )
    sweep_rows = []
    for label, ws in weight_sweep().items():
        for scope, names, ms in (
            ("model", cube.models, m_v),
            ("perturbation", cube.perturbations, m_c),
        ):
            for name, value in zip(names, vre(ms, ws), strict=True):
                sweep_rows.append((scope, name, label, float(value)))
    vre_sweep = pl.DataFrame(sweep_rows, schema=["scope", "name", "weighting", "vre"], orient="row")
    vre_family = _family_table(cube.models, groups, a) if groups is not None else None
    return RobustnessTables(sub, vre_model, vre_perturbation, vre_sweep, vre_family)


def _family_table(
    models: Sequence[str], groups: Mapping[str, Sequence[int]], a: Mapping[str, np.ndarray]
) -> pl.DataFrame:
    """``vre_family``: model x family (model-major, as :func:`vre_arrays` lays them out)."""
    names = list(groups)
    f_idx, m_idx = np.meshgrid(range(len(names)), range(len(models)))
    return pl.DataFrame(
        {
            "model": np.array(models, dtype=object)[m_idx.ravel()].tolist(),
            "family": np.array(names, dtype=object)[f_idx.ravel()].tolist(),
            "n_perturbations": [len(groups[names[i]]) for i in f_idx.ravel()],
            "accuracy": a["a_f"].ravel(),
            "relative_drop": a["rel_f"].ravel(),
            "vre": a["vre_f"].ravel(),
        }
    )

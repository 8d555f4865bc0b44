"""Uncertainty of every metric: a paired cluster bootstrap over images (docs/metrics.md).

The questions of a run are a sample, and the questions of one image are correlated, so
the unit resampled is the image (``cluster="image"``; ``"question"`` treats questions as
independent). One matrix of resample weights (how often each cluster is drawn in each of
B resamples) is drawn per run, on its own seed, and applied to every model and every
subset: differences between models or perturbations are therefore paired.

Everything is a matrix product: per-cluster sums of scores and counts per (model,
subset) times the weight matrix give every subset's accuracy in every resample, and
each metric is then computed from those accuracies by the same vectorized code as its
point estimate. Row 0 of every replicate array is the observed data (all weights 1),
added up question by question in question-id order rather than through the clusters, so
it is the tables' number bit for bit whatever the clusters or the rows' order.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import sparse

from vqarobust.seeding import derive_seed

CLUSTERS = ("image", "question")
ADJUSTMENTS = ("holm", "bh")
# Rows of per-type accuracy are turned into intervals this many at a time, so memory stays
# at (chunk x replicates) floats whatever the number of question types.
CHUNK_ROWS = 4096

INTERVAL_SCHEMA = {
    "metric": pl.String,
    "model": pl.String,
    "modality": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int64,
    "key": pl.String,
    "estimate": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "se": pl.Float64,
}


@dataclass(frozen=True)
class Settings:
    """``uncertainty`` settings of a run (config section of the same name)."""

    resamples: int = 1000
    level: float = 0.95
    cluster: str = "image"
    seed: int = 0
    adjust: str = "holm"
    # Models the effective-robustness line is fitted on; empty: leave-one-model-out over all.
    effective_reference: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "effective_reference", tuple(self.effective_reference))
        if self.resamples < 0:
            raise ValueError(f"uncertainty.resamples must be >= 0, got {self.resamples}")
        if not 0 < self.level < 1:
            raise ValueError(f"uncertainty.level must be in (0, 1), got {self.level}")
        if self.cluster not in CLUSTERS:
            raise ValueError(f"uncertainty.cluster must be one of {CLUSTERS}, got {self.cluster!r}")
        if self.adjust not in ADJUSTMENTS:
            raise ValueError(
                f"uncertainty.adjust must be one of {ADJUSTMENTS}, got {self.adjust!r}"
            )

    @classmethod
    def resolved(cls, values: Mapping[str, object] | None) -> dict[str, object]:
        """``values`` with the defaults filled in, as a plain mapping: what an analysis's
        settings hold, so that it travels in params and compares by value."""
        return dataclasses.asdict(cls.from_mapping(values))

    @classmethod
    def from_mapping(cls, values: Mapping[str, object] | None) -> Settings:
        """Settings from a config mapping (missing keys take the defaults)."""
        values = dict(values or {})
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown uncertainty settings {sorted(unknown)}")
        return cls(**values)  # type: ignore[arg-type]


# --- resampling ---------------------------------------------------------------------------


def cluster_index(questions: pl.DataFrame, cluster: str = "image") -> tuple[pl.DataFrame, int]:
    """``question_id -> cluster`` (0..n-1, clusters sorted by id) and the number of clusters.

    The order is the sorted image (or question) id, so the weights a cluster receives do
    not depend on the order in which files or rows were read."""
    if cluster not in CLUSTERS:
        raise ValueError(f"cluster must be one of {CLUSTERS}, got {cluster!r}")
    col = "image_id" if cluster == "image" else "question_id"
    ids = questions.select(pl.col(col).unique().sort())
    index = ids.with_row_index("cluster").with_columns(pl.col("cluster").cast(pl.Int64))
    mapping = (
        questions.select("question_id", pl.col(col).alias("_id"))
        .join(index.rename({col: "_id"}), on="_id")
        .select("question_id", "cluster")
    )
    return mapping, ids.height


def replicate_weights(n_clusters: int, resamples: int, seed: int) -> np.ndarray:
    """Weights (1 + resamples, n_clusters): row 0 all ones (the data as observed), row b the
    number of times each cluster is drawn in resample b (n_clusters draws with
    replacement). Seeded on its own (``seed`` and the tag ``"bootstrap"``), so the same
    run settings give the same resamples."""
    if n_clusters < 1:
        raise ValueError("the bootstrap needs at least one cluster")
    rng = np.random.default_rng(derive_seed(seed, "bootstrap", n_clusters))
    counts = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples)
    return np.vstack([np.ones((1, n_clusters)), counts]).astype(np.float64)


@dataclass(frozen=True)
class ClusterSums:
    """Per-cluster sums of value columns for each distinct key: ``sums[col]`` and
    ``count`` are sparse (rows x clusters) matrices, ``keys`` the row labels;
    ``observed[col]`` and ``n`` are the plain sums and counts per key, added up question by
    question in the rows' order, whatever the clusters.

    This is the kernel of every mean of per-question values (accuracy per subset and per
    type, context reliance, effective accuracy): :meth:`means` and :meth:`totals` give
    replicate 0 (the data as observed) from ``observed``, so the number a table reports
    does not depend on how questions are grouped into clusters (``uncertainty.cluster``),
    and the resamples from the cluster matrices."""

    keys: pl.DataFrame
    sums: dict[str, sparse.csr_matrix]
    count: sparse.csr_matrix
    observed: dict[str, np.ndarray]
    n: np.ndarray

    def means(self, col: str, weights: np.ndarray, rows: slice | None = None) -> np.ndarray:
        """Weighted mean of ``col`` per key in every replicate: (replicates, rows); row 0
        of ``weights`` is the data as observed (all ones, :func:`replicate_weights`)."""
        rows = rows or slice(None)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._replicates(
                self.observed[col][rows] / self.n[rows],
                self.sums[col][rows],
                weights,
                self.count[rows],
            )

    def where(self, predicate: pl.Expr) -> ClusterSums:
        """Only the keys for which ``predicate`` holds."""
        keep = self.keys.with_row_index("_i").filter(predicate)["_i"].to_numpy()
        return ClusterSums(
            self.keys[keep],
            {k: m[keep] for k, m in self.sums.items()},
            self.count[keep],
            {k: v[keep] for k, v in self.observed.items()},
            self.n[keep],
        )

    def relabel(self, keys: pl.DataFrame) -> ClusterSums:
        """The same sums under new row labels (same order and length)."""
        if keys.height != self.keys.height:
            raise ValueError("relabel needs one label per row")
        return ClusterSums(keys, self.sums, self.count, self.observed, self.n)

    def totals(self, col: str | None, weights: np.ndarray) -> np.ndarray:
        """Weighted sum of ``col`` (``None``: of the row count) per key: (replicates, rows);
        row 0 of ``weights`` is the data as observed."""
        if col is None:
            return self._replicates(self.n.astype(np.float64), self.count, weights)
        return self._replicates(self.observed[col], self.sums[col], weights)

    @staticmethod
    def _replicates(
        observed: np.ndarray,
        sums: sparse.csr_matrix,
        weights: np.ndarray,
        count: sparse.csr_matrix | None = None,
    ) -> np.ndarray:
        """``observed`` as row 0, then ``sums`` (over ``count``) under each resample."""
        if weights.ndim != 2 or not (weights[0] == 1).all():
            raise ValueError("row 0 of the replicate weights must be all ones (the data)")
        if weights.shape[0] == 1:  # the data alone (OBSERVED), whatever the clusters
            return observed[None, :]
        rest = np.asarray(sums @ weights[1:].T).T
        if count is not None:
            rest = rest / np.asarray(count @ weights[1:].T).T
        return np.vstack([observed[None, :], rest])


# Replicate weights of the data alone: a table's point estimate is its kernel at these.
OBSERVED = np.ones((1, 1))


@dataclass(frozen=True)
class Encoding:
    """Rows of a table coded by their distinct key combinations: ``inverse[i]`` is the
    row of ``labels`` (the combinations, sorted by key) that table row ``i`` holds."""

    inverse: np.ndarray
    labels: pl.DataFrame
    order: np.ndarray | None = None  # the rows by question id (None: as they come)

    def refine(self, codes: np.ndarray, names: pl.DataFrame) -> Encoding:
        """The encoding by these keys and one more: ``codes`` (per table row) index the
        rows of ``names``, which sort after the keys already here."""
        inverse, distinct = _dense(self.inverse * names.height + codes)
        return Encoding(
            inverse,
            pl.concat(
                [self.labels[distinct // names.height], names[distinct % names.height]],
                how="horizontal",
            ),
            self.order,
        )

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per label, the sum of ``values`` (one per table row), added up in question-id
        order: the same bits whatever order the table's rows come in."""
        if self.order is None:
            return np.bincount(self.inverse, values, self.labels.height)
        return np.bincount(self.inverse[self.order], values[self.order], self.labels.height)


# Codes up to this many per row are counted in an array (no sort); beyond, np.unique.
DENSE_CODES_PER_ROW = 4


def _dense(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(code, return_inverse=True)`` for non-negative codes, without a sort of
    the rows where the codes are few (a table's distinct keys usually are)."""
    if code.size == 0 or code.max() >= DENSE_CODES_PER_ROW * code.size + 1024:
        return np.unique(code, return_inverse=True)[::-1]
    distinct = np.flatnonzero(np.bincount(code))
    lookup = np.zeros(distinct[-1] + 1, dtype=np.int64)
    lookup[distinct] = np.arange(distinct.size)
    return lookup[code], distinct


def encode_keys(rows: pl.DataFrame, keys: Sequence[str]) -> Encoding:
    """The :class:`Encoding` of ``rows`` by ``keys``. Each key column is mapped to integer
    codes by a lookup of its few distinct values, so no copy or group-by of the big table
    is made."""
    keys = list(keys)
    code = np.zeros(rows.height, dtype=np.int64)
    uniques = {}
    for k in keys:
        col = rows.get_column(k)
        if col.null_count():
            raise ValueError(f"column {k!r} has empty cells")
        u = col.unique().sort()
        uniques[k] = u
        idx = col.replace_strict(u, pl.int_range(u.len(), eager=True), return_dtype=pl.Int64)
        code = code * u.len() + idx.to_numpy()
    inverse, distinct = _dense(code)
    labels = {}
    rest = distinct
    for k in reversed(keys):
        n = uniques[k].len()
        labels[k] = uniques[k].gather(rest % n)
        rest = rest // n
    # The sums of a table must not depend on how its rows were read (image order for one
    # analysis, question order for another): they are added up by question id.
    order = (
        np.argsort(rows.get_column("question_id").to_numpy(), kind="stable")
        if "question_id" in rows.columns
        else None
    )
    return Encoding(inverse, pl.DataFrame([labels[k] for k in keys]), order)


def _coded(rows: pl.DataFrame, keys: Sequence[str] | Encoding) -> Encoding:
    return keys if isinstance(keys, Encoding) else encode_keys(rows, keys)


def cluster_sums(
    rows: pl.DataFrame, keys: Sequence[str] | Encoding, values: Sequence[str], n_clusters: int
) -> ClusterSums:
    """Sum ``values`` per (``keys``, ``cluster``) of per-question ``rows`` (which carry a
    ``cluster`` column); keys sorted (``keys`` may be the rows' :class:`Encoding`
    already). The sums are sparse matrices built straight from the rows (duplicate cells
    are added up), never a group-by over the big table."""
    coded = _coded(rows, keys)
    row, labels = coded.inverse, coded.labels
    col = rows.get_column("cluster").to_numpy()
    shape = (labels.height, n_clusters)

    def matrix(data: np.ndarray) -> sparse.csr_matrix:
        return sparse.csr_matrix((data, (row, col)), shape=shape)

    data = {v: rows.get_column(v).cast(pl.Float64).to_numpy() for v in values}
    observed = {v: coded.sums(d) for v, d in data.items()}
    return ClusterSums(
        labels,
        {v: matrix(d) for v, d in data.items()},
        matrix(np.ones(rows.height)),
        observed,
        np.bincount(row, minlength=labels.height),
    )


def observed_sums(
    rows: pl.DataFrame, keys: Sequence[str] | Encoding, values: Sequence[str]
) -> ClusterSums:
    """:func:`cluster_sums` with one cluster that holds every question (``rows`` need no
    ``cluster`` column): what a point table needs, with :data:`OBSERVED` as the weights."""
    coded = _coded(rows, keys)
    row, labels = coded.inverse, coded.labels
    observed = {v: coded.sums(rows.get_column(v).cast(pl.Float64).to_numpy()) for v in values}
    n = np.bincount(row, minlength=labels.height)

    def column(data: np.ndarray) -> sparse.csr_matrix:
        return sparse.csr_matrix(data.astype(np.float64)[:, None])

    return ClusterSums(labels, {v: column(o) for v, o in observed.items()}, column(n), observed, n)


def summarize(values: np.ndarray, level: float) -> dict[str, np.ndarray]:
    """Estimate (row 0), percentile interval and standard error of replicate values
    (replicates, ...) over the resamples (rows 1..). NaN resamples (a statistic undefined
    in that resample) are left out; without resamples the interval is NaN."""
    estimate = values[0]
    boot = values[1:]
    nan = np.full(estimate.shape, np.nan)
    if boot.shape[0] < 2:
        return {"estimate": estimate, "low": nan, "high": nan, "se": nan}
    alpha = (1 - level) / 2
    flat = boot.reshape(boot.shape[0], -1)
    low, high = np.quantile(flat, [alpha, 1 - alpha], axis=0)
    se = np.std(flat, axis=0, ddof=1)
    holes = np.isnan(flat).any(axis=0)
    if holes.any():
        # numpy's nanquantile loops per column: only the columns with NaNs take that path.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low[holes], high[holes] = np.nanquantile(flat[:, holes], [alpha, 1 - alpha], axis=0)
            se[holes] = np.nanstd(flat[:, holes], axis=0, ddof=1)
    low, high, se = (a.reshape(estimate.shape) for a in (low, high, se))
    return {"estimate": estimate, "low": low, "high": high, "se": se}


def mean_intervals(
    rows: pl.DataFrame,
    keys: Sequence[str],
    values: Sequence[str],
    cluster: str,
    settings: Settings,
) -> pl.DataFrame:
    """Per distinct ``keys``: the bootstrap interval (``<value>_low``, ``<value>_high``) of
    the mean of each ``values`` column over ``rows``, resampling the distinct values of
    column ``cluster`` (the images of a diagnostic's rows) with the run's ``settings``
    (resamples, seed, level). The diagnostics that are means over images or questions
    (SSIM, PSNR, attention shift, colour-bias shares) get their intervals here; null
    bounds without resamples (``uncertainty.resamples: 0``) or without rows."""
    bounds = [f"{v}_{side}" for v in values for side in ("low", "high")]
    if rows.is_empty():
        return (
            rows.select(keys)
            .clear()
            .with_columns(pl.lit(None, pl.Float64).alias(b) for b in bounds)
        )
    ids = rows.select(pl.col(cluster).unique().sort()).with_row_index("cluster")
    ids = ids.with_columns(pl.col("cluster").cast(pl.Int64))
    coded = rows.join(ids, on=cluster, how="left")
    sums = cluster_sums(coded, keys, values, ids.height)
    out = sums.keys
    if settings.resamples == 0:
        return out.with_columns(pl.lit(None, pl.Float64).alias(b) for b in bounds)
    weights = replicate_weights(ids.height, settings.resamples, settings.seed)
    for v in values:
        s = summarize(sums.means(v, weights), settings.level)
        out = out.with_columns(pl.Series(f"{v}_low", s["low"]), pl.Series(f"{v}_high", s["high"]))
    return out


def interval_frame(
    metric: str, labels: pl.DataFrame, values: np.ndarray, level: float
) -> pl.DataFrame:
    """Rows of the ``intervals`` table for replicate ``values`` (replicates, len(labels));
    ``labels`` holds any of model, modality, perturbation, severity, key."""
    stats = summarize(values, level)
    out = labels.with_columns(
        pl.lit(metric).alias("metric"), *(pl.Series(k, v) for k, v in stats.items())
    )
    missing = [
        pl.lit(None, dtype=t).alias(c) for c, t in INTERVAL_SCHEMA.items() if c not in out.columns
    ]
    # Undefined statistics (no resamples, or none where they exist) are NULL, not NaN.
    return out.with_columns(missing).select(
        [
            pl.col(c).cast(t).fill_nan(None) if t == pl.Float64 else pl.col(c).cast(t)
            for c, t in INTERVAL_SCHEMA.items()
        ]
    )


def chunked_intervals(
    metric: str, sums: ClusterSums, col: str, weights: np.ndarray, level: float
) -> Iterator[pl.DataFrame]:
    """Intervals of the per-key means of ``col``, ``CHUNK_ROWS`` keys at a time."""
    for start in range(0, sums.keys.height, CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        yield interval_frame(metric, sums.keys[rows], sums.means(col, weights, rows), level)


# --- tests of clean vs perturbed ------------------------------------------------------------


def sign_test_p(worse: np.ndarray, better: np.ndarray) -> np.ndarray:
    """Two-sided exact binomial p-value of ``worse`` vs ``better`` discordant pairs (p=1/2).

    On 0/1 scores this is the exact McNemar test; on graded scores (VQA accuracy in
    0, 0.3, 0.6, 0.9, 1) it is the sign test on the per-question differences."""
    from scipy.stats import binom

    worse = np.asarray(worse, dtype=np.int64)
    better = np.asarray(better, dtype=np.int64)
    n = worse + better
    k = np.minimum(worse, better)
    p = np.where(n > 0, 2 * binom.cdf(k, np.maximum(n, 1), 0.5), 1.0)
    return np.minimum(p, 1.0)


def bootstrap_p(values: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "the difference is zero" from replicate ``values``
    (row 0 the data, the rest the resamples; NaN resamples left out): twice the smaller
    share of resamples on either side of zero, each counted with the data's own
    (``(n + 1) / (B + 1)``), at most 1; NaN without resamples. It is below ``1 - level``
    only when the percentile interval of :func:`summarize` excludes zero."""
    boot = np.asarray(values, dtype=float)[1:]
    boot = boot[~np.isnan(boot)]
    if boot.size < 2:
        return float("nan")
    below, above = int((boot <= 0).sum()), int((boot >= 0).sum())
    return float(min(1.0, 2 * (min(below, above) + 1) / (boot.size + 1)))


ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg"}


def family_note(c: Mapping[str, Any], what: str) -> str:
    """How a comparison (a ``model_comparisons`` row, or a row carrying its ``p_adjusted``,
    ``adjust`` and ``family_size``) was decided, for a sentence: e.g. "Holm-adjusted p =
    0.002 over the 1 pairwise comparison of image-side VRE"."""
    n = c["family_size"]
    name = ADJUSTMENT_NAMES.get(c["adjust"], c["adjust"])
    return (
        f"{name}-adjusted p = {c['p_adjusted']:.3f} over the {n} pairwise "
        f"comparison{'' if n == 1 else 's'} of {what}"
    )


def adjust_p(p: np.ndarray, method: str = "holm") -> np.ndarray:
    """Adjusted p-values over all given tests: Holm's step-down (family-wise error) or
    Benjamini-Hochberg's step-up (false discovery rate)."""
    p = np.asarray(p, dtype=float)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    i = np.arange(1, m + 1)
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum((m - i + 1) * ranked, 1.0))
    elif method == "bh":
        adj = np.minimum.accumulate((m / i * ranked)[::-1])[::-1]
        adj = np.minimum(adj, 1.0)
    else:
        raise ValueError(f"adjust must be one of {ADJUSTMENTS}, got {method!r}")
    out = np.empty(m)
    out[order] = adj
    return out


DROP_TEST_SCHEMA = {
    "model": pl.String,
    "modality": pl.String,
    "perturbation": pl.String,
    "severity": pl.Int64,
    "n": pl.Int64,
    "n_worse": pl.Int64,
    "n_better": pl.Int64,
    "mean_difference": pl.Float64,
    "test": pl.String,
    "p_value": pl.Float64,
    "p_adjusted": pl.Float64,
    "adjust": pl.String,
    "significant": pl.Boolean,
}


def drop_tests(
    scored: pl.DataFrame,
    modalities: Sequence[str] = ("image", "text", "basic_question"),
    exclude: Sequence[str] = (),
    level: float = 0.95,
    adjust: str = "holm",
) -> pl.DataFrame:
    """Per (model, perturbation, severity): the paired test of clean vs perturbed scores of
    the same questions (:func:`sign_test_p`, named ``mcnemar_exact`` where every score of
    the cell is 0 or 1, else ``sign``), adjusted over every cell (``adjust``);
    ``significant`` at ``1 - level``. ``mean_difference`` = mean(perturbed - clean)."""
    tested = pl.col("modality").is_in(list(modalities)) & ~pl.col("perturbation").is_in(
        list(exclude)
    )
    # The clean score of each row's question, as a window (a join would copy the table).
    clean_score = (
        pl.col("score").filter(pl.col("modality") == "clean").first().over("model", "question_id")
    )
    cells = (
        scored.lazy()
        .select(
            "model",
            "modality",
            "perturbation",
            "severity",
            "score",
            clean_score.alias("clean_score"),
        )
        .filter(tested & pl.col("clean_score").is_not_null())
    )
    d = pl.col("score") - pl.col("clean_score")
    binary = pl.col("score").is_in([0.0, 1.0]) & pl.col("clean_score").is_in([0.0, 1.0])
    cells = (
        cells.group_by("model", "modality", "perturbation", "severity")
        .agg(
            pl.len().alias("n"),
            (d < 0).sum().alias("n_worse"),
            (d > 0).sum().alias("n_better"),
            d.mean().alias("mean_difference"),
            binary.all().alias("binary"),
        )
        .sort("model", "modality", "perturbation", "severity")
        .collect()
    )
    if cells.is_empty():
        return pl.DataFrame(schema=DROP_TEST_SCHEMA)
    p = sign_test_p(cells["n_worse"].to_numpy(), cells["n_better"].to_numpy())
    adj = adjust_p(p, adjust)
    return (
        cells.with_columns(
            pl.when(pl.col("binary"))
            .then(pl.lit("mcnemar_exact"))
            .otherwise(pl.lit("sign"))
            .alias("test"),
            pl.Series("p_value", p),
            pl.Series("p_adjusted", adj),
            pl.lit(adjust).alias("adjust"),
            pl.Series("significant", adj < 1 - level),
        )
        .cast({k: v for k, v in DROP_TEST_SCHEMA.items()})
        .select(list(DROP_TEST_SCHEMA))
    )


# --- effective robustness -------------------------------------------------------------------

LOGIT_EPS = 1e-4  # accuracies are clipped to [eps, 1 - eps] before the logit
# A line needs two models besides the one it predicts (out of sample), so three in a run.
MIN_FIT_POINTS = 2
MIN_MODELS_FOR_FIT = MIN_FIT_POINTS + 1


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, LOGIT_EPS, 1 - LOGIT_EPS)
    return np.log(p / (1 - p))


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares intercept and slope of y on x along the last axis, per leading index;
    NaN where x is constant."""
    xm = x.mean(axis=-1, keepdims=True)
    ym = y.mean(axis=-1, keepdims=True)
    sxx = ((x - xm) ** 2).sum(axis=-1)
    sxy = ((x - xm) * (y - ym)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)
    return ym[..., 0] - slope * xm[..., 0], slope


def effective_robustness(
    clean: np.ndarray, perturbed: np.ndarray, reference: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Taori et al. (2020), out of sample: each model's expected perturbed accuracy from the
    line logit(perturbed) = a + b logit(clean) fitted on the *other* models of
    ``reference`` (a boolean mask over the models, the last axis; default every model:
    leave-one-model-out), and its residual in accuracy units, ``perturbed - sigmoid(a + b
    logit(clean))``. An in-sample fit would make the residuals sum to zero, so some model
    would always look effectively robust; out of sample none need.

    Returns ``predicted``, ``residual``, ``intercept`` and ``slope`` per model (NaN where
    the model's fit has fewer than :data:`MIN_FIT_POINTS` models) and ``fitted``, the
    models with a fit. Leading axes (replicates) are fitted separately."""
    n = clean.shape[-1]
    reference = np.ones(n, bool) if reference is None else np.asarray(reference, bool)
    x, y = _logit(clean), _logit(perturbed)
    shape = np.broadcast_shapes(x.shape, y.shape)
    a, b = np.full(shape, np.nan), np.full(shape, np.nan)
    fitted = np.zeros(n, bool)
    for j in range(n):
        on = reference.copy()
        on[j] = False
        if on.sum() < MIN_FIT_POINTS:
            continue
        fitted[j] = True
        a[..., j], b[..., j] = linear_fit(x[..., on], y[..., on])
    predicted = 1 / (1 + np.exp(-(a + b * x)))
    return {
        "predicted": predicted,
        "residual": perturbed - predicted,
        "intercept": a,
        "slope": b,
        "fitted": fitted,
    }


def rank_shares(values: np.ndarray) -> np.ndarray:
    """Share of replicates (rows) in which each column holds each rank (1 = lowest value):
    (columns, ranks). Ties are broken by column order; NaN rows are left out."""
    ok = ~np.isnan(values).any(axis=1)
    values = values[ok]
    n_cols = values.shape[1]
    if not values.shape[0]:
        return np.full((n_cols, n_cols), np.nan)
    ranks = np.argsort(np.argsort(values, axis=1, kind="stable"), axis=1, kind="stable")
    counts = np.stack([(ranks == r).sum(axis=0) for r in range(n_cols)], axis=1)
    return counts / values.shape[0]


__all__ = [
    "ADJUSTMENTS",
    "CLUSTERS",
    "OBSERVED",
    "ClusterSums",
    "INTERVAL_SCHEMA",
    "Settings",
    "adjust_p",
    "chunked_intervals",
    "cluster_index",
    "cluster_sums",
    "observed_sums",
    "drop_tests",
    "Encoding",
    "encode_keys",
    "effective_robustness",
    "interval_frame",
    "linear_fit",
    "rank_shares",
    "replicate_weights",
    "sign_test_p",
    "summarize",
]

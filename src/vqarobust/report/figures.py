"""Figures of the report, each a function from polars tables to a matplotlib Figure.

Colours are fixed across figures: one per model (:func:`model_colours`) and one hue per
perturbation class (:data:`CLASS_COLOURS`), with the members of a class in shades of it.
Perturbations are ordered by class everywhere.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from vqarobust.corruptions.stylize import FAMILY as STYLIZE_FAMILY  # noqa: E402

# One hue per perturbation class (ImageNet-C classes, colour transforms, stylize, the
# geometric, resolution and occlusion families).
CLASS_COLOURS = {
    "noise": "#d62728",
    "blur": "#1f77b4",
    "weather": "#17becf",
    "attribute": "#ff7f0e",
    "physical": "#2ca02c",
    "digital": "#9467bd",
    "colour": "#8c564b",
    STYLIZE_FAMILY: "#e377c2",
    "char": "#bcbd22",
    "word": "#393b79",
    "geometric": "#637939",
    "resolution": "#8c6d31",
    "occlusion": "#843c39",
}
RANKER_ORDER = ("lasso", "cosine", "bleu")
ANSWER_CHARS = 18  # answers longer than this are cut in the answer grid
MODALITY_COLOURS = {
    "image": "#4c72b0",
    "text": "#bcbd22",
    "basic_question": "#8172b3",
    "all": "#555555",
}
OTHER_CLASS = "#7f7f7f"
MODEL_PALETTE = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)


def model_colours(models: Sequence[str]) -> dict[str, str]:
    """A colour per model, by sorted name, the same in every figure of a report."""
    return {m: MODEL_PALETTE[i % len(MODEL_PALETTE)] for i, m in enumerate(sorted(models))}


def class_order(families: dict[str, str]) -> list[str]:
    """Perturbations grouped by class (classes in CLASS_COLOURS order), by name within."""
    rank = {c: i for i, c in enumerate(CLASS_COLOURS)}
    return sorted(families, key=lambda p: (rank.get(families[p], len(rank)), families[p], p))


def perturbation_colours(families: dict[str, str]) -> dict[str, tuple]:
    """Shades of its class's hue for each perturbation (darker to lighter by name)."""
    out = {}
    for fam in {*families.values()}:
        members = sorted(p for p in families if families[p] == fam)
        base = np.array(to_rgb(CLASS_COLOURS.get(fam, OTHER_CLASS)))
        for k, p in enumerate(members):
            mix = 0.55 * k / max(1, len(members) - 1)  # toward white, at most 55%
            out[p] = tuple(base + (1 - base) * mix)
    return out


def heatmap(
    df: pl.DataFrame,
    value: str,
    title: str,
    families: dict[str, str],
    cmap: str = "Reds",
    not_significant: set[tuple[str, str]] | None = None,
) -> Figure:
    """A model x perturbation heatmap of ``value``, numbers in the cells, perturbations
    grouped by class (class names above, separators between classes). Cells in
    ``not_significant`` ((model, perturbation) pairs) are hatched and marked "ns"."""
    models = sorted(df["model"].unique().to_list())
    cols = [p for p in class_order(families) if p in set(df["perturbation"])]
    grid = np.full((len(models), len(cols)), np.nan)
    for m, c, v in df.select("model", "perturbation", value).iter_rows():
        if c in cols:
            grid[models.index(m), cols.index(c)] = v
    fig, ax = plt.subplots(figsize=(2.2 + 0.62 * len(cols), 1.9 + 0.42 * len(models)))
    im = ax.imshow(grid, cmap=cmap, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=50, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    finite = grid[np.isfinite(grid)]
    mid = (finite.max() + finite.min()) / 2 if finite.size else 0
    for i in range(len(models)):
        for j in range(len(cols)):
            if np.isfinite(grid[i, j]):
                colour = "white" if grid[i, j] > mid else "black"
                ns = (models[i], cols[j]) in (not_significant or set())
                label = f"{grid[i, j]:.2f}\nns" if ns else f"{grid[i, j]:.2f}"
                ax.text(j, i, label, ha="center", va="center", fontsize=6.5, c=colour)
                if ns:
                    ax.add_patch(
                        Rectangle(
                            (j - 0.5, i - 0.5),
                            1,
                            1,
                            fill=False,
                            hatch="////",
                            edgecolor="#777777",
                            lw=0,
                        )
                    )
    start = 0
    for j in range(1, len(cols) + 1):
        if j == len(cols) or families[cols[j]] != families[cols[start]]:
            fam = families[cols[start]]
            ax.text(
                (start + j - 1) / 2,
                -0.75,
                fam,
                ha="center",
                va="bottom",
                fontsize=7.5,
                color=CLASS_COLOURS.get(fam, OTHER_CLASS),
                fontweight="bold",
            )
            if j < len(cols):
                ax.axvline(j - 0.5, color="white", lw=2.5)
            start = j
    ax.set_title(title, pad=26, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01)
    fig.tight_layout()
    return fig


def error_vs_severity(accuracy: pl.DataFrame, families: dict[str, str]) -> Figure:
    """Error (1 - accuracy) against severity, one panel per model, one line per
    perturbation in its class's shades; severity 0 is the clean error. Where ``accuracy``
    has ``low`` and ``high`` (the interval of each accuracy), a band shows the interval."""
    models = sorted(accuracy["model"].unique().to_list())
    present = set(accuracy["perturbation"]) - {"clean"}
    order = [p for p in class_order(families) if p in present]
    colours = perturbation_colours({p: families[p] for p in order})
    fig, axes = _model_panels(len(models))
    for ax, model in zip(axes.flat, models, strict=False):
        rows = accuracy.filter(pl.col("model") == model)
        clean = rows.filter(pl.col("perturbation") == "clean")["accuracy"]
        bands = "low" in rows.columns
        clean_row = rows.filter(pl.col("perturbation") == "clean")
        for p in order:
            r = rows.filter(pl.col("perturbation") == p).sort("severity")
            if clean.len():
                r = pl.concat([clean_row.select(r.columns), r])
            sev, err = r["severity"].to_list(), (1 - r["accuracy"]).to_numpy()
            ax.plot(sev, err, marker="o", ms=2.5, lw=1.1, color=colours[p], label=p)
            # Bands from severity 1 on: the clean interval is drawn once, below.
            b = r.filter(pl.col("severity") > 0)
            if bands and b["low"].null_count() < b.height:
                lo = (1 - b["high"].fill_null(np.nan)).to_numpy()
                hi = (1 - b["low"].fill_null(np.nan)).to_numpy()
                ax.fill_between(b["severity"], lo, hi, color=colours[p], alpha=0.10, lw=0)
        if bands and clean_row.height and clean_row["low"][0] is not None:
            a0, lo0, hi0 = (clean_row[c][0] for c in ("accuracy", "low", "high"))
            ax.errorbar(
                0,
                1 - a0,
                yerr=[[hi0 - a0], [a0 - lo0]],
                fmt="none",
                ecolor="black",
                elinewidth=0.9,
                capsize=3,
                zorder=4,
            )
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("severity", fontsize=8)
        ax.set_xticks(range(6))
        ax.grid(alpha=0.3)
    return _finish_panels(fig, axes, len(models), "error (1 - accuracy)")


def _present_order(
    present: set[str], families: dict[str, str]
) -> tuple[list[str], dict[str, tuple]]:
    """The perturbations present, by class (unknown ones last), and their colours."""
    order = [p for p in class_order(families) if p in present]
    order += sorted(present - set(order))
    return order, perturbation_colours({p: families.get(p, "other") for p in order})


def _model_panels(n: int) -> tuple[Figure, np.ndarray]:
    """A grid of ``n`` panels sharing the y axis, three per row."""
    ncols = min(3, n)
    nrows = -(-n // ncols)
    return plt.subplots(
        nrows, ncols, figsize=(4.0 * ncols + 2.2, 3.2 * nrows), squeeze=False, sharey=True
    )


def _finish_panels(fig: Figure, axes: np.ndarray, used: int, ylabel: str) -> Figure:
    """Blank the unused panels of a per-model grid, label its rows, add the legend of the
    first panel at the right."""
    for ax in axes.flat[used:]:
        ax.axis("off")
    for row in axes:
        row[0].set_ylabel(ylabel, fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def image_quality(
    quality: pl.DataFrame, accuracy: pl.DataFrame, families: dict[str, str]
) -> Figure:
    """Severity calibration: left, mean SSIM against severity, one line per corruption in
    its class's shades (severity 0 = the clean image, SSIM 1) with the band of the mean's
    bootstrap interval over the images; right, each corrupted subset's accuracy (mean over
    the models) against its mean SSIM, marker size growing with severity."""
    order, colours = _present_order(set(quality["perturbation"]), families)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 4.0))
    mean_acc = (
        accuracy.filter(pl.col("severity") > 0)
        .group_by("perturbation", "severity")
        .agg(pl.col("accuracy").mean())
    )
    for p in order:
        r = quality.filter(pl.col("perturbation") == p).sort("severity")
        sev = [0, *r["severity"].to_list()]
        mean = np.array([1.0, *r["ssim_mean"].to_list()])
        low = np.array([1.0, *r["ssim_low"].fill_null(r["ssim_mean"]).to_list()])
        high = np.array([1.0, *r["ssim_high"].fill_null(r["ssim_mean"]).to_list()])
        left.plot(sev, mean, marker="o", ms=2.5, lw=1.1, color=colours[p], label=p)
        if len(sev) > 2:
            left.fill_between(sev, low, high, color=colours[p], alpha=0.15, lw=0)
        # Sorted: a join keeps no row order, and overlapping markers are drawn in it.
        a = r.join(mean_acc, on=["perturbation", "severity"], how="inner").sort("severity")
        right.scatter(
            a["ssim_mean"],
            a["accuracy"],
            s=8 + 8 * a["severity"].to_numpy(),
            color=colours[p],
            alpha=0.85,
            edgecolors="none",
        )
    left.set(xlabel="severity", ylabel="mean SSIM against the clean image", ylim=(0, 1.02))
    left.set_xticks(range(int(quality["severity"].max() or 5) + 1))
    right.set(xlabel="mean SSIM of the subset", ylabel="accuracy (mean over models)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def _radar(ax, labels: list[str], series: dict[str, list[float]], colours: dict) -> None:
    angles = np.linspace(0, 2 * np.pi, len(labels), endpoint=False).tolist()
    for name, values in series.items():
        ax.plot([*angles, angles[0]], [*values, values[0]], color=colours[name], lw=1.5, label=name)
        ax.fill([*angles, angles[0]], [*values, values[0]], color=colours[name], alpha=0.08)
    ax.set_xticks(angles, labels, fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_yticks([0.25, 0.5, 0.75], ["", "", ""])


def radars(submetrics: pl.DataFrame, labels: dict[str, str]) -> Figure:
    """The five scaled sub-metrics (0 = most robust in the matrix): mean per model, and
    mean per perturbation class (over models)."""
    names = list(labels)
    cols = [f"{m}_scaled" for m in names]
    short = [
        m.replace("corruption_error_diff", "corruption error\ndifference").replace("_", " ")
        for m in names
    ]
    by_model = submetrics.group_by("model").agg(pl.col(cols).mean()).sort("model")
    by_class = submetrics.group_by("family").agg(pl.col(cols).mean()).sort("family")
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.2), subplot_kw={"projection": "polar"})
    mc = model_colours(by_model["model"].to_list())
    _radar(axes[0], short, {r[0]: list(r[1:]) for r in by_model.iter_rows()}, mc)
    axes[0].set_title("per model", fontsize=9)
    cc = {f: CLASS_COLOURS.get(f, OTHER_CLASS) for f in by_class["family"]}
    _radar(axes[1], short, {r[0]: list(r[1:]) for r in by_class.iter_rows()}, cc)
    axes[1].set_title("per perturbation class", fontsize=9)
    for ax in axes:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.05, 1.0))
    fig.tight_layout()
    return fig


def vre_sweep(sweep: pl.DataFrame) -> Figure:
    """VRE per model under each weighting (uniform, and each sub-metric at 0.6)."""
    df = sweep.filter(pl.col("scope") == "model")
    models = sorted(df["name"].unique().to_list())
    weightings = ["uniform", *sorted(w for w in df["weighting"].unique() if w != "uniform")]
    colours = model_colours(models)
    width = 0.8 / len(models)
    fig, ax = plt.subplots(figsize=(3.5 + 1.2 * len(weightings), 3.4))
    for k, m in enumerate(models):
        rows = {
            w: v
            for _, w, v in df.filter(pl.col("name") == m)
            .select("name", "weighting", "vre")
            .iter_rows()
        }
        xs = np.arange(len(weightings)) + (k - (len(models) - 1) / 2) * width
        ax.bar(xs, [rows.get(w, np.nan) for w in weightings], width, color=colours[m], label=m)
    ax.set_xticks(
        range(len(weightings)), [w.replace("_0.6", "\n0.6") for w in weightings], fontsize=7
    )
    ax.set_ylabel("VRE (lower = more robust)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def type_accuracy(
    table: pl.DataFrame, kind: str, families: dict[str, str], top: int | None = None
) -> Figure:
    """Mean accuracy per ``kind`` (answer_type, question_type) x perturbation, one panel
    per model; the first column is the clean accuracy. ``top`` keeps the most frequent
    types (VQAv2 has 65 question types)."""
    models = sorted(table["model"].unique().to_list())
    present = set(table["perturbation"]) - {"clean"}
    cols = ["clean", *[p for p in class_order(families) if p in present]]
    counts = table.filter(pl.col("severity") == 0).group_by(kind).agg(pl.col("n").max())
    counts = counts.sort(["n", kind], descending=[True, False])
    types = sorted(counts[kind].head(top).to_list() if top else counts[kind].to_list())
    table = table.filter(pl.col(kind).is_in(types))
    means = table.group_by("model", kind, "perturbation").agg(pl.col("accuracy").mean())
    height = 0.9 + 0.35 * (len(types) + 1) * len(models)
    fig, axes = plt.subplots(
        len(models), 1, figsize=(2.4 + 0.55 * len(cols), height), squeeze=False
    )
    for ax, m in zip(axes[:, 0], models, strict=True):
        grid = np.full((len(types), len(cols)), np.nan)
        for _, t, c, v in means.filter(pl.col("model") == m).iter_rows():
            if c in cols:
                grid[types.index(t), cols.index(c)] = v
        ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
        for i in range(len(types)):
            for j in range(len(cols)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=6.5)
        ax.set_yticks(range(len(types)), types, fontsize=7)
        ax.set_xticks(
            range(len(cols)),
            cols if ax is axes[-1, 0] else [""] * len(cols),
            rotation=50,
            ha="right",
            fontsize=7,
        )
        ax.set_title(m, fontsize=8, loc="left")
    fig.tight_layout()
    return fig


def mmi_modalities(mmi: pl.DataFrame) -> Figure:
    """MMI per model and modality (image, text, basic questions, image and text together),
    grouped bars; lower = more robust."""
    models = sorted(mmi["model"].unique().to_list())
    groups = [g for g in MODALITY_COLOURS if g in set(mmi["group"])]
    fig, ax = plt.subplots(figsize=(2.5 + 1.3 * len(models), 3.2))
    width = 0.8 / max(1, len(groups))
    for k, g in enumerate(groups):
        rows = {m: v for m, v in mmi.filter(pl.col("group") == g).select("model", "mmi").rows()}
        xs = np.arange(len(models)) + (k - (len(groups) - 1) / 2) * width
        vals = [rows.get(m, np.nan) for m in models]
        ax.bar(xs, vals, width, color=MODALITY_COLOURS[g], label=g.replace("_", " "))
        _error_bars(ax, xs, mmi.filter(pl.col("group") == g), models, "mmi")
        for x, v in zip(xs, vals, strict=True):
            if np.isfinite(v):
                ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6.5)
    ax.set_xticks(range(len(models)), models, fontsize=8, rotation=20, ha="right")
    ax.set_ylabel("MMI (relative drop)", fontsize=8)
    ax.axhline(0, color="black", lw=0.6)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def rscore_levels(rscore: pl.DataFrame) -> Figure:
    """R_score against basic-question noise level, one panel per ranker, one line per
    model (its colour); higher = more robust."""
    colours = model_colours(rscore["model"].unique().to_list())
    rankers = [r for r in RANKER_ORDER if r in set(rscore["ranker"])]
    rankers += sorted(set(rscore["ranker"]) - set(rankers))
    fig, axes = plt.subplots(
        1, len(rankers), figsize=(2.2 + 3.0 * len(rankers), 3.2), squeeze=False, sharey=True
    )
    for ax, ranker in zip(axes[0], rankers, strict=True):
        for model in sorted(colours):
            r = rscore.filter((pl.col("model") == model) & (pl.col("ranker") == ranker))
            r = r.sort("severity")
            ax.plot(
                r["severity"],
                r["rscore"],
                marker="o",
                ms=3,
                lw=1.2,
                color=colours[model],
                label=model,
            )
            if "low" in r.columns and r["low"].null_count() < r.height:
                ax.fill_between(
                    r["severity"],
                    r["low"].fill_null(np.nan),
                    r["high"].fill_null(np.nan),
                    color=colours[model],
                    alpha=0.12,
                    lw=0,
                )
        ax.set_title(f"ranker: {ranker}", fontsize=9)
        ax.set_xlabel("level (1 = most similar)", fontsize=8)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("R_score", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def _error_bars(ax, xs: np.ndarray, df: pl.DataFrame, models: list[str], value: str) -> None:
    """Interval bars (columns ``low``, ``high`` of ``df``, one row per model) at ``xs``."""
    if "low" not in df.columns:
        return
    rows = {m: (v, lo, hi) for m, v, lo, hi in df.select("model", value, "low", "high").rows()}
    for x, m in zip(xs, models, strict=True):
        v, lo, hi = rows.get(m, (None, None, None))
        if v is not None and lo is not None and hi is not None:
            ax.errorbar(
                x,
                v,
                yerr=[[max(0.0, v - lo)], [max(0.0, hi - v)]],
                fmt="none",
                ecolor="black",
                elinewidth=0.8,
                capsize=2,
            )


def vre_intervals(vre: pl.DataFrame, ranks: pl.DataFrame, level: float) -> Figure:
    """Left: VRE per model with its interval (lower = more robust). Right: the share of
    bootstrap resamples in which each model holds each VRE rank."""
    vre = vre.sort("vre")
    models = vre["model"].to_list()
    colours = model_colours(models)
    fig, (left, right) = plt.subplots(1, 2, figsize=(4.5 + 1.6 * len(models), 3.3))
    xs = np.arange(len(models))
    left.bar(xs, vre["vre"], 0.6, color=[colours[m] for m in models])
    _error_bars(left, xs, vre, models, "vre")
    left.set_xticks(xs, models, fontsize=8, rotation=20, ha="right")
    left.set_ylabel("VRE (lower = more robust)", fontsize=8)
    left.set_title(f"VRE with {level:.0%} interval", fontsize=9)
    left.grid(axis="y", alpha=0.3)
    n_ranks = len(models)
    bottom = np.zeros(len(models))
    greys = plt.get_cmap("viridis")(np.linspace(0.15, 0.9, max(1, n_ranks)))
    for r in range(1, n_ranks + 1):
        share = dict(ranks.filter(pl.col("rank") == r).select("model", "share").rows())
        vals = np.array([share.get(m, 0.0) for m in models])
        right.bar(xs, vals, 0.6, bottom=bottom, color=greys[r - 1], label=f"rank {r}")
        bottom += vals
    right.set_xticks(xs, models, fontsize=8, rotation=20, ha="right")
    right.set_ylim(0, 1.0)
    right.set_ylabel("share of resamples", fontsize=8)
    right.set_title("VRE rank over the resamples", fontsize=9)
    right.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def effective_robustness(fit: pl.DataFrame) -> Figure:
    """Perturbed vs clean accuracy per model on logit axes, one panel per modality; each
    model's expected value (hollow, from the line fitted on the other models) joined to its
    measured one, labelled with its effective robustness (the vertical distance, in
    accuracy) and its interval. A model without a fit is drawn without an expected value."""
    modalities = [m for m in MODALITY_COLOURS if m in set(fit["modality"])]
    fig, axes = plt.subplots(
        1, len(modalities), figsize=(1.5 + 3.6 * len(modalities), 3.4), squeeze=False
    )
    colours = model_colours(fit["model"].unique().to_list())

    def logit(p: np.ndarray) -> np.ndarray:
        p = np.clip(np.asarray(p, float), 1e-4, 1 - 1e-4)
        return np.log(p / (1 - p))

    for ax, modality in zip(axes[0], modalities, strict=True):
        rows = fit.filter(pl.col("modality") == modality).sort("model")
        x, y = logit(rows["clean_accuracy"]), logit(rows["perturbed_accuracy"])
        expected = logit(rows["predicted"].fill_null(np.nan).to_numpy())
        span = np.linspace(x.min() - 0.3, x.max() + 0.3, 20)
        for xi, yi, ei, r in zip(x, y, expected, rows.iter_rows(named=True), strict=True):
            ax.scatter(xi, yi, color=colours[r["model"]], s=28, zorder=3, label=r["model"])
            if np.isfinite(ei):
                ax.scatter(
                    xi, ei, facecolors="none", edgecolors=colours[r["model"]], s=28, zorder=3
                )
                ax.plot([xi, xi], [ei, yi], color=colours[r["model"]], lw=1, ls="--")
            er = r["effective_robustness"]
            text = "" if er is None else f"{er:+.3f}"
            if r["low"] is not None:
                text += f" [{r['low']:+.3f}, {r['high']:+.3f}]"
            ax.annotate(text, (xi, yi), fontsize=6.5, xytext=(4, 4), textcoords="offset points")
        ticks = np.array(
            [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99]
        )
        ax.set_xlim(span.min(), span.max())
        ylo, yhi = (
            np.nanmin(np.r_[y, expected]) - 0.2,
            np.nanmax(np.r_[y, expected]) + 0.2,
        )
        ax.set_ylim(ylo, yhi)
        xt = ticks[(logit(ticks) >= span.min()) & (logit(ticks) <= span.max())]
        yt = ticks[(logit(ticks) >= ylo) & (logit(ticks) <= yhi)]
        ax.set_xticks(logit(xt), [f"{t:g}" for t in xt], fontsize=7)
        ax.set_yticks(logit(yt), [f"{t:g}" for t in yt], fontsize=7)
        ax.set_xlabel("clean accuracy (logit axis)", fontsize=8)
        ax.set_ylabel("perturbed accuracy (logit axis)", fontsize=8)
        ax.set_title(f"{modality.replace('_', ' ')}: all perturbations", fontsize=9)
        ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def placeholder(message: str) -> Figure:
    """A small figure that says why there is nothing to plot (the file still exists)."""
    fig, ax = plt.subplots(figsize=(5, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=9, color="#555555")
    return fig


def answer_grid(
    question: str,
    truth: str,
    thumbs: pl.DataFrame,
    answers: pl.DataFrame,
    families: dict[str, str],
    attention: pl.DataFrame | None = None,
    attention_model: str | None = None,
) -> Figure:
    """One sample question: its image on the clean subset and at every corruption and
    severity (rows: corruptions grouped by class; columns: severities), with each model's
    answer under it, green when it scores 1, orange when partly right, red when wrong.

    ``thumbs``: perturbation, severity, png; ``answers``: model, perturbation, severity,
    answer, score. ``attention`` (perturbation, severity, rows, cols, weights) of
    ``attention_model`` on this question is drawn over each image as a heatmap.
    """
    import io

    from PIL import Image

    present = set(thumbs["perturbation"]) - {"clean"}
    rows = ["clean", *[p for p in class_order(families) if p in present]]
    severities = sorted(s for s in set(thumbs["severity"]) if s > 0) or [0]
    models = sorted(answers["model"].unique().to_list())
    # Each model's answer takes a text line under the image; columns are as wide as the
    # longest line (6-point text: about 0.052 inch per character), answers cut at 18.
    longest = max((len(m) for m in models), default=0) + 4 + ANSWER_CHARS
    cell_w = max(1.45, 0.052 * longest + 0.15)
    cell_h = 1.15 + 0.15 * len(models)
    width, height = cell_w * len(severities) + 1.6, cell_h * len(rows) + 0.7
    fig, axes = plt.subplots(len(rows), len(severities), squeeze=False, figsize=(width, height))
    images = {(p, s): png for p, s, png in thumbs.select("perturbation", "severity", "png").rows()}
    said = {
        (m, p, s): (a, sc)
        for m, p, s, a, sc in answers.select(
            "model", "perturbation", "severity", "answer", "score"
        ).rows()
    }
    maps = {}
    if attention is not None:
        for p, sev, r, c, w in attention.select(
            "perturbation", "severity", "rows", "cols", "weights"
        ).rows():
            maps[(p, int(sev))] = np.asarray(w, dtype=np.float64).reshape(r, c)
    for i, p in enumerate(rows):
        for j, s in enumerate(severities):
            ax = axes[i, j]
            ax.set_xticks([])
            ax.set_yticks([])
            key = (p, 0) if p == "clean" else (p, s)
            if key not in images or (p == "clean" and j > 0):
                ax.axis("off")
                continue
            with Image.open(io.BytesIO(images[key])) as im:
                pixels = np.asarray(im.convert("RGB"))
            ax.imshow(pixels, interpolation="nearest")
            if key in maps:
                # Scaled to the map's own peak: where the model looks, not how much;
                # opaque only where it looks, so the image's colours stay readable.
                grid = maps[key] / maps[key].max()
                h, w = pixels.shape[:2]
                ax.imshow(
                    grid,
                    cmap="inferno",
                    alpha=0.7 * grid,
                    interpolation="bilinear",
                    extent=(-0.5, w - 0.5, h - 0.5, -0.5),
                )
            for k, m in enumerate(models):
                answer, score = said.get((m, *key), ("-", 0.0))
                colour = "#1a7f37" if score >= 1 else "#d9822b" if score > 0 else "#c62828"
                mark = "\u2713" if score >= 1 else "\u2717" if score == 0 else "~"
                shown = answer if len(answer) <= ANSWER_CHARS else answer[: ANSWER_CHARS - 1] + "…"
                ax.text(
                    0.5,
                    -0.05 - 0.14 * k,
                    f"{mark} {m}: {shown}",
                    transform=ax.transAxes,
                    ha="center",
                    va="top",
                    fontsize=6,
                    color=colour,
                    clip_on=False,
                )
            if j == 0:
                label = p if p == "clean" else f"{p}\n({families.get(p, '')})"
                ax.set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
            if i == 1:
                ax.set_title(f"severity {s}", fontsize=7)
    overlay = f"   heatmap: attention of {attention_model}" if maps else ""
    fig.suptitle(f"\u201c{question}\u201d   ground truth: {truth}{overlay}", fontsize=9)
    fig.subplots_adjust(
        left=1.3 / width,
        right=0.99,
        top=1 - 0.45 / height,
        bottom=0.15 * len(models) / height,
        hspace=0.15 + 0.17 * len(models),
        wspace=0.08,
    )
    return fig


def attention_shift(shift: pl.DataFrame, families: dict[str, str]) -> Figure:
    """Mean JS divergence of the attention map from the clean one against severity, one
    panel per model, one line per corruption in its class's shades (0 at severity 0),
    with the band of the mean's bootstrap interval over the images."""
    models = sorted(shift["model"].unique().to_list())
    order, colours = _present_order(set(shift["perturbation"]), families)
    fig, axes = _model_panels(len(models))
    for ax, model in zip(axes.flat, models, strict=False):
        rows = shift.filter(pl.col("model") == model)
        for p in order:
            r = rows.filter(pl.col("perturbation") == p).sort("severity")
            if r.height:
                sev = [0, *r["severity"].to_list()]
                ax.plot(
                    sev,
                    [0.0, *r["js_mean"].to_list()],
                    marker="o",
                    ms=2.5,
                    lw=1.1,
                    color=colours[p],
                    label=p,
                )
                low = [0.0, *r["js_low"].fill_null(r["js_mean"]).to_list()]
                high = [0.0, *r["js_high"].fill_null(r["js_mean"]).to_list()]
                ax.fill_between(sev, low, high, color=colours[p], alpha=0.15, lw=0)
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("severity", fontsize=8)
        ax.grid(alpha=0.3)
    return _finish_panels(fig, axes, len(models), "JS divergence from the clean map")


CONTEXT_COLOURS = {"swap_class": "#4c72b0", "swap_attribute": "#dd8452", "all": "#55a868"}


def context_reliance(reliance: pl.DataFrame, effective: pl.DataFrame) -> Figure:
    """Left: context reliance per model and swap kind (lower = less reliant). Right: clean
    vs effective accuracy per model (all swaps)."""
    models = sorted(reliance["model"].unique().to_list())
    fig, (left, right) = plt.subplots(1, 2, figsize=(4 + 2.2 * len(models), 3.4))
    kinds = [k for k in CONTEXT_COLOURS if k in set(reliance["perturbation"])]
    width = 0.8 / max(1, len(kinds))
    for j, kind in enumerate(kinds):
        rows = dict(
            reliance.filter(pl.col("perturbation") == kind).select("model", "reliance").rows()
        )
        xs = np.arange(len(models)) + (j - (len(kinds) - 1) / 2) * width
        vals = [rows.get(m, np.nan) for m in models]
        left.bar(xs, vals, width, color=CONTEXT_COLOURS[kind], label=kind.replace("_", " "))
        _error_bars(left, xs, reliance.filter(pl.col("perturbation") == kind), models, "reliance")
        for x, v in zip(xs, vals, strict=True):
            if np.isfinite(v):
                left.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6.5)
    left.set_title("Context reliance (lower = less reliant)", fontsize=9)
    left.set_ylabel("share of correct answers that change", fontsize=8)
    left.legend(fontsize=7)
    eff = effective.filter(pl.col("perturbation") == "all")
    rows = {m: (a, e) for m, a, e in eff.select("model", "accuracy", "effective_accuracy").rows()}
    xs = np.arange(len(models))
    for k, (label, colour) in enumerate(
        (("clean accuracy", "#8c8c8c"), ("effective accuracy", "#55a868"))
    ):
        vals = [rows.get(m, (np.nan, np.nan))[k] for m in models]
        right.bar(xs + (k - 0.5) * 0.4, vals, 0.4, color=colour, label=label)
        if k == 1:
            _error_bars(right, xs + 0.2, eff, models, "effective_accuracy")
        for x, v in zip(xs + (k - 0.5) * 0.4, vals, strict=True):
            if np.isfinite(v):
                right.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=6.5)
    right.set_title("Accuracy unchanged by every swap", fontsize=9)
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.set_xticks(range(len(models)), models, fontsize=8, rotation=20, ha="right")
        ax.set_ylim(0, 1.08)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def context_flips(examples: pl.DataFrame) -> Figure:
    """Each flipped swap: the clean image and the swapped one, with the question, what was
    swapped and the model's two answers."""
    from PIL import Image

    n = examples.height
    fig, axes = plt.subplots(n, 2, figsize=(6.4, 2.6 * n), squeeze=False)
    for row, ex in zip(axes, examples.iter_rows(named=True), strict=True):
        panels = (
            (row[0], "clean_png", f"clean: {ex['clean_answer']}"),
            (row[1], "swapped_png", f"swapped: {ex['swapped_answer']}"),
        )
        for ax, key, title in panels:
            ax.imshow(Image.open(io.BytesIO(ex[key])))
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{ex['model']} {title}", fontsize=8)
        row[0].set_ylabel(f"{ex['question']}\n(truth: {ex['truth']})", fontsize=7.5)
        kind = ex["perturbation"].replace("_", " ")
        row[1].set_xlabel(f"{kind}: {ex['before']} -> {ex['after']}", fontsize=7)
    fig.tight_layout()
    return fig

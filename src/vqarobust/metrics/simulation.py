"""Seeded synthetic scored predictions from a known model, for tests and benchmarks.

Each image has a latent accuracy drawn from a Beta distribution (mean ``accuracy``,
concentration ``concentration``: the lower it is, the more the questions of an image are
correlated); each of its questions is answered correctly with that probability on the
clean image. Under a perturbation of drop ``d``, a correct clean answer stays correct
with probability ``1 - d`` and a wrong one stays wrong, so the true perturbed accuracy is
``accuracy * (1 - d)`` and the true relative drop is ``d``. ``concentration=None`` gives
every image the same accuracy (questions independent).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from vqarobust.metrics.sample_size import Target


@dataclass(frozen=True)
class SimulatedModel:
    """True clean accuracy and true relative drop per perturbed subset of one model."""

    accuracy: float
    drops: Mapping[tuple[str, str, int], float]  # (modality, perturbation, severity) -> d


def simulate_questions(
    n_images: int, questions_per_image: int | Sequence[int], seed: int
) -> pl.DataFrame:
    """Questions (question_id, image_id, question_type, answer_type) of ``n_images``
    images; a fixed number per image or drawn uniformly from ``questions_per_image``."""
    rng = np.random.default_rng([seed, 1])
    if isinstance(questions_per_image, int):
        counts = np.full(n_images, questions_per_image)
    else:
        counts = rng.choice(np.asarray(questions_per_image), size=n_images)
    image_id = np.repeat(np.arange(n_images, dtype=np.int64), counts)
    n = image_id.size
    types = np.array(["what color", "how many", "is there"])
    answer_types = np.array(["other", "number", "yes/no"])
    kind = rng.integers(0, 3, n)
    return pl.DataFrame(
        {
            "question_id": np.arange(n, dtype=np.int64),
            "image_id": image_id,
            "question_type": types[kind],
            "answer_type": answer_types[kind],
        }
    )


def write_questions(questions: pl.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write simulated questions as a dataset's questions file: every question "what is
    it?" with ten human answers "right", so that the answer "right" scores 1 and any
    other 0 (as the simulated predictions' ``answer`` column)."""
    import pyarrow as pa

    from vqarobust import store

    rows = questions.with_columns(
        pl.lit("what is it?").alias("question"),
        pl.lit(["right"] * 10, dtype=pl.List(pl.String)).alias("answers"),
    ).select(store.QUESTION_SCHEMA.names)
    table = pa.Table.from_pylist(rows.to_dicts(), schema=store.QUESTION_SCHEMA)
    store.write_table(table, path)


def simulate_scored(
    questions: pl.DataFrame,
    models: Mapping[str, SimulatedModel],
    seed: int,
    concentration: float | None = 4.0,
) -> pl.DataFrame:
    """Scored predictions (model, modality, perturbation, severity, question_id, answer,
    score, truncated) of every model on the clean subset and on each of its drops."""
    image_idx = questions["image_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    n_images = int(image_idx.max()) + 1
    qid = questions["question_id"].to_numpy()
    frames = []
    for k, (name, model) in enumerate(sorted(models.items())):
        rng = np.random.default_rng([seed, 2, k])
        if concentration is None:
            p_image = np.full(n_images, model.accuracy)
        else:
            a = model.accuracy * concentration
            p_image = rng.beta(a, concentration - a, n_images)
        clean = rng.random(qid.size) < p_image[image_idx]
        subsets = [("clean", "clean", 0, clean)]
        for (modality, perturbation, severity), d in sorted(model.drops.items()):
            keep = rng.random(qid.size) >= d
            subsets.append((modality, perturbation, severity, clean & keep))
        for modality, perturbation, severity, correct in subsets:
            frames.append(
                pl.DataFrame(
                    {
                        "model": name,
                        "modality": modality,
                        "perturbation": perturbation,
                        "severity": np.full(qid.size, severity, dtype=np.int16),
                        "question_id": qid,
                        "answer": np.where(correct, "right", "wrong"),
                        "score": correct.astype(np.float64),
                        "truncated": False,
                    }
                )
            )
    return pl.concat(frames)


@dataclass(frozen=True)
class SimulatedStudy:
    """One simulated dataset's shape and truth: ``n_images`` images of
    ``questions_per_image`` questions each, one model of true clean ``accuracy`` that
    loses the share ``drop`` of its right answers under one perturbation, its per-image
    accuracy Beta-distributed with ``concentration`` (None: independent questions)."""

    n_images: int = 300
    questions_per_image: int = 5
    accuracy: float = 0.7
    drop: float = 0.2
    concentration: float | None = 4.0


DEFAULT_STUDY = SimulatedStudy()


def interval_coverage(
    n_sets: int,
    cluster: str = "image",
    study: SimulatedStudy = DEFAULT_STUDY,
    resamples: int = 999,
    level: float = 0.95,
) -> tuple[float, float]:
    """Share of ``n_sets`` simulated datasets of ``study`` whose intervals of clean
    accuracy and of the relative drop under one perturbation cover the true values, with
    the run's bootstrap (:mod:`vqarobust.metrics.uncertainty`) resampling ``cluster``."""
    from vqarobust.metrics.uncertainty import (
        cluster_index,
        cluster_sums,
        replicate_weights,
        summarize,
    )

    hits_acc = hits_drop = 0
    accuracy, drop = study.accuracy, study.drop
    model = SimulatedModel(accuracy, {("image", "noise", 1): drop})
    for k in range(n_sets):
        q = simulate_questions(study.n_images, study.questions_per_image, seed=1000 + k)
        scored = simulate_scored(q, {"m": model}, seed=1000 + k, concentration=study.concentration)
        mapping, n = cluster_index(q, cluster)
        rows = scored.join(mapping, on="question_id")
        sums = cluster_sums(rows, ["modality"], ["score"], n)  # keys sorted: clean, image
        acc = sums.means("score", replicate_weights(n, resamples, seed=k))
        clean, pert = acc[:, 0], acc[:, 1]
        a = summarize(clean[:, None], level)
        d = summarize(((clean - pert) / clean)[:, None], level)
        hits_acc += bool(a["low"][0] <= accuracy <= a["high"][0])
        hits_drop += bool(d["low"][0] <= drop <= d["high"][0])
    return hits_acc / n_sets, hits_drop / n_sets


def interval_width(
    cluster: str, concentration: float | None, n_images: int = 1000, resamples: int = 2000
) -> float:
    """Width of the interval of one model's accuracy (true 0.7, 5 questions per image)."""
    from vqarobust.metrics.uncertainty import (
        cluster_index,
        cluster_sums,
        replicate_weights,
        summarize,
    )

    q = simulate_questions(n_images, 5, seed=7)
    scored = simulate_scored(q, {"m": SimulatedModel(0.7, {})}, seed=7, concentration=concentration)
    mapping, n = cluster_index(q, cluster)
    sums = cluster_sums(scored.join(mapping, on="question_id"), ["model"], ["score"], n)
    s = summarize(sums.means("score", replicate_weights(n, resamples, seed=0)), 0.95)
    return float(s["high"][0] - s["low"][0])


@dataclass(frozen=True)
class PlanCheck:
    """What :func:`check_plan` planned from a pilot and what datasets of those sizes
    reached: images and mean interval half-width of clean accuracy and of the relative
    drop, images and share of datasets in which the paired difference was found."""

    accuracy_images: int
    accuracy_half_width: float
    drop_images: int
    drop_half_width: float
    detect_images: int
    power: float


def _replicates(
    study: SimulatedStudy,
    models: Mapping[str, SimulatedModel],
    n_images: int,
    seed: int,
    resamples: int,
) -> dict[str, np.ndarray]:
    """Bootstrap replicates (row 0 observed) of model a's clean accuracy and relative drop
    and of the clean difference a - b, on one simulated dataset of ``n_images``."""
    from vqarobust.metrics.uncertainty import cluster_index, cluster_sums, replicate_weights

    q = simulate_questions(n_images, study.questions_per_image, seed=seed)
    scored = simulate_scored(q, models, seed=seed, concentration=study.concentration)
    mapping, n = cluster_index(q, "image")
    sums = cluster_sums(scored.join(mapping, on="question_id"), ["model", "modality"], ["score"], n)
    acc = sums.means("score", replicate_weights(n, resamples, seed=seed))
    col = {(m, s): i for i, (m, s) in enumerate(sums.keys.select("model", "modality").rows())}
    a, a_pert, b = acc[:, col["a", "clean"]], acc[:, col["a", "image"]], acc[:, col["b", "clean"]]
    return {"accuracy": a, "drop": (a - a_pert) / a, "difference": a - b}


def check_plan(
    target: Target,
    study: SimulatedStudy = DEFAULT_STUDY,
    n_pilot: int = 200,
    n_sets: int = 200,
    resamples: int = 400,
) -> PlanCheck:
    """Plan from one simulated pilot of ``n_pilot`` images, then measure the plan on
    ``n_sets`` fresh datasets of each planned size drawn from the same truth.

    Model ``a`` has the study's accuracy and drop; model ``b`` is ``target.detect`` less
    accurate on clean images, so the true difference is exactly the one to detect. The
    half-widths are of the run's percentile intervals and the difference counts as found
    when its interval at ``target.level`` excludes zero, as the summary decides."""
    from vqarobust.metrics.sample_size import images_for_half_width, images_to_detect
    from vqarobust.metrics.uncertainty import summarize

    models = {
        "a": SimulatedModel(study.accuracy, {("image", "noise", 1): study.drop}),
        "b": SimulatedModel(study.accuracy - target.detect, {}),
    }
    pilot = _replicates(study, models, n_pilot, 1, resamples)
    se = {k: float(np.std(v[1:], ddof=1)) for k, v in pilot.items()}
    n_acc = images_for_half_width(se["accuracy"], n_pilot, target)
    n_drop = images_for_half_width(se["drop"], n_pilot, target)
    n_detect = images_to_detect(se["difference"], n_pilot, target)
    if not (n_acc and n_drop and n_detect):
        raise RuntimeError(f"the simulated pilot has no spread to plan from: {se}")

    def interval(values: np.ndarray) -> tuple[float, float]:
        s = summarize(values[:, None], target.level)
        return float(s["low"][0]), float(s["high"][0])

    widths: dict[str, list[float]] = {"accuracy": [], "drop": []}
    found = 0
    for k in range(n_sets):
        for key, n in (("accuracy", n_acc), ("drop", n_drop)):
            low, high = interval(_replicates(study, models, n, 100 + k, resamples)[key])
            widths[key].append((high - low) / 2)
        low, high = interval(
            _replicates(study, models, n_detect, 10_000 + k, resamples)["difference"]
        )
        found += bool(low > 0 or high < 0)
    return PlanCheck(
        n_acc,
        float(np.mean(widths["accuracy"])),
        n_drop,
        float(np.mean(widths["drop"])),
        n_detect,
        found / n_sets,
    )

"""A simulated study for the uncertainty tests: three models of rising accuracy whose
drops grow with severity, on 120 images of 2 to 6 questions each, bootstrapped 300 times
(tests/test_uncertainty.py and tests/test_kernels.py read it through the
``simulated_run`` fixture of tests/conftest.py)."""

from __future__ import annotations

import polars as pl

from vqarobust.metrics.intervals import uncertainty_tables
from vqarobust.metrics.simulation import SimulatedModel, simulate_questions, simulate_scored
from vqarobust.metrics.uncertainty import Settings

FAMILIES = {
    "noise_a": "noise",
    "blur_b": "blur",
    "typo": "char",
    "paraphrase": "sentence",
    "blank": "control",
}


def drops(scale: float) -> dict[tuple[str, str, int], float]:
    """A model's accuracy drop per (modality, perturbation, severity), ``scale`` times the
    base drops (the blank control always loses 0.6)."""
    d = {
        ("image", c, s): min(0.9, scale * 0.03 * s * (i + 1))
        for i, c in enumerate(["noise_a", "blur_b"])
        for s in range(1, 6)
    }
    d |= {("text", "typo", s): min(0.9, scale * 0.02 * s) for s in range(1, 6)}
    # One level: MMI's "ave" and its plain mean over sets differ on the text side.
    d |= {("text", "paraphrase", 1): 0.3 * scale}
    d |= {("basic_question", "bq_x", s): 0.01 * s for s in range(1, 8)}
    return d | {("image", "blank", 1): 0.6}


def simulated_run() -> tuple[pl.DataFrame, pl.DataFrame, dict[str, pl.DataFrame]]:
    """The questions, the scored answers and the uncertainty tables of the study."""
    q = simulate_questions(120, [2, 3, 4, 5, 6], seed=0)
    models = {f"m{k}": SimulatedModel(0.55 + 0.12 * k, drops(1 + 0.4 * k)) for k in range(3)}
    scored = simulate_scored(q, models, seed=0)
    tables = uncertainty_tables(
        scored, q, Settings(resamples=300), families=FAMILIES, controls=["blank"]
    )
    return q, scored, tables

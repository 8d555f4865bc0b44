"""The paper mode's exact LASSO (vqarobust.text.lasso): optimality over the whole pool,
equality with whole-pool LARS and with coordinate descent, and why scikit-learn's LARS is
not called on the paper's lambda directly."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust.text import lasso

PAPER_LAMBDA = 1e-6


def pool(seed: int, n: int, d: int, clusters: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors in clusters (as sentence embeddings are) and a main question near one
    of them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d))
    vectors = centres[rng.integers(0, clusters, n)] + 0.7 * rng.normal(size=(n, d))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    b = centres[0] + 0.7 * rng.normal(size=d)
    return vectors, b / np.linalg.norm(b)


def optimality(vectors: np.ndarray, b: np.ndarray, x: np.ndarray, alpha: float) -> float:
    """The largest violation of the LASSO's optimality conditions, relative to alpha:
    |a_j . r| / d <= alpha everywhere, = alpha with x_j's sign where x_j != 0."""
    d = vectors.shape[1]
    corr = vectors @ (b - x @ vectors) / d
    outside = np.abs(corr) / alpha - 1
    active = x != 0
    on = np.abs(corr[active] * np.sign(x[active]) / alpha - 1)
    return float(max(outside.max(), on.max(initial=0.0)))


def test_the_working_set_solution_is_optimal_for_the_whole_pool_and_is_larss():
    vectors, b = pool(0, 3000, 32)
    alpha = PAPER_LAMBDA / (2 * 32)
    x, rounds = lasso.lasso_working_set(vectors, b, alpha, start=100, grow=100)
    assert rounds > 1  # the first working set alone was not optimal: the check added some
    assert optimality(vectors, b, x, alpha) < 1e-6
    # Near the paper's lambda the solution almost interpolates b with about d weights.
    assert 20 <= np.count_nonzero(x) <= 32
    whole = lasso._lars(vectors.T.copy(), b, alpha)
    np.testing.assert_allclose(x, whole, atol=1e-9)


def test_sklearns_lars_alone_stops_short_of_the_papers_lambda():
    """LassoLars ends its path once alpha is within float32's epsilon (1.2e-7) of the
    target: at lambda 1e-6 (alpha ~1.6e-8 for d = 32) it stops at a larger alpha (here
    about twice it; at d = 384 up to about 90 times), with a worse objective. Scaling b
    by 1 / alpha (the solution scales with it) avoids that."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LassoLars

    vectors, b = pool(1, 2000, 32)
    d = vectors.shape[1]
    alpha = PAPER_LAMBDA / (2 * d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        direct = LassoLars(alpha=alpha, fit_intercept=False, max_iter=20 * d)
        short = direct.fit(vectors.T, b).coef_
    exact, _ = lasso.lasso_working_set(vectors, b, alpha)

    def objective(x: np.ndarray) -> float:
        r = b - x @ vectors
        return float(r @ r / (2 * d) + alpha * np.abs(x).sum())

    assert optimality(vectors, b, short, alpha) > 0.5  # correlations of 1.5 alpha remain
    assert optimality(vectors, b, exact, alpha) < 1e-6
    assert objective(exact) < objective(short)


def test_at_a_moderate_alpha_it_is_coordinate_descents_solution():
    """An independent solver: where coordinate descent converges (alpha 1e-3), its
    weights are the working set's."""
    from sklearn.linear_model import Lasso

    vectors, b = pool(2, 1500, 24)
    alpha = 1e-3
    x, _ = lasso.lasso_working_set(vectors, b, alpha, start=50, grow=50)
    cd = Lasso(alpha=alpha, fit_intercept=False, max_iter=100_000, tol=1e-14)
    np.testing.assert_allclose(x, cd.fit(vectors.T, b).coef_, atol=1e-7)


def test_candidates_restrict_the_problem_to_their_rows():
    vectors, b = pool(3, 800, 16)
    alpha = PAPER_LAMBDA / 32
    keep = np.flatnonzero(np.arange(800) % 3 != 0)
    x, _ = lasso.lasso_working_set(vectors, b, alpha, keep, start=40, grow=40)
    alone, _ = lasso.lasso_working_set(np.ascontiguousarray(vectors[keep]), b, alpha)
    assert x.shape == (len(keep),)
    np.testing.assert_allclose(x, alone, atol=1e-9)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(40, 400),
    start=st.integers(1, 60),
    grow=st.integers(1, 80),
)
def test_the_solution_does_not_depend_on_the_working_sets_sizes(seed, n, start, grow):
    vectors, b = pool(seed, n, 12)
    alpha = PAPER_LAMBDA / 24
    x, _ = lasso.lasso_working_set(vectors, b, alpha, start=start, grow=grow)
    reference, _ = lasso.lasso_working_set(vectors, b, alpha, start=n)
    assert optimality(vectors, b, x, alpha) < 1e-6
    np.testing.assert_allclose(x, reference, atol=1e-8)


def test_bad_input_is_an_error():
    vectors, b = pool(4, 50, 8)
    with pytest.raises(ValueError, match="alpha must be positive"):
        lasso.lasso_working_set(vectors, b, 0.0)
    with pytest.raises(TypeError, match="float64"):
        lasso.lasso_working_set(vectors.astype(np.float32), b, 1e-6)


def test_the_ranking_jobs_code_digest_covers_the_solver():
    """rank_basic_questions' code param covers what its script imports (the plan's one
    rerun rule): an edit to the solver reranks."""
    from vqarobust.code_digest import module_files
    from vqarobust.plan.code import script_modules

    script = Path(__file__).parents[1] / "workflow" / "scripts" / "rank_basic_questions.py"
    files = {p.name for m in script_modules(script) for p in module_files(m)}
    assert {"ranking.py", "lasso.py", "overlap.py"} <= files


def test_a_lars_that_stops_short_is_an_error(monkeypatch):
    """Where LARS stops before the optimum (degenerate columns, its step limit), the
    conditions inside the working set fail and the solver says so instead of ranking."""
    vectors, b = pool(5, 300, 16)
    alpha = PAPER_LAMBDA / 32
    exact, _ = lasso.lasso_working_set(vectors, b, alpha)
    short = lasso._lars
    monkeypatch.setattr(lasso, "_lars", lambda a, bb, al: short(a, bb, al) * 0.999)
    with pytest.raises(RuntimeError, match="LARS stopped short of the LASSO's optimum"):
        lasso.lasso_working_set(vectors, b, alpha)
    assert np.count_nonzero(exact) > 0

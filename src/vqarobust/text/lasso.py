"""The basic-question paper's LASSO over a whole pool, solved exactly but without LARS
walking the whole pool at every step.

The problem is ``min (1 / (2 d)) ||A x - b||^2 + alpha ||x||_1`` (scikit-learn's
scaling, d the embedding dimension) with A the candidates' embeddings as columns. LARS
over all n candidates reads the (d x n) matrix at each of its hundreds of steps, which at
the paper's 186,027 candidates is bound by memory traffic (docs/text.md, "Time").

The solution has at most about d non-zero weights, and the optimality (KKT) conditions
say which: x solves the problem exactly when every candidate's correlation with the
residual, ``|a_j . r| / d``, is at most alpha (equal, with x_j's sign, where x_j is
non-zero). So :func:`lasso_working_set` solves the problem by LARS on a working set (the
candidates most correlated with b), checks the conditions over the whole pool with one
matrix-vector product, adds the candidates that violate them and solves again, until none
does. It ends only when the working set's solution is optimal for the whole pool, so its
result is the whole-pool LARS solution (the problem's solution is unique when the
embeddings are in general position); ``tests/test_lasso.py`` compares the two. The
conditions inside the working set are checked too: where LARS stops short of the
optimum, the solver raises.

scikit-learn's LARS ends its path once alpha is within float32's epsilon (1.2e-7) of the
target, which at the paper's lambda (alpha = 1e-6 / 768, about 1.3e-9) means it stops
far above it. The solution scales with b and alpha together (x(s b, s alpha) = s x(b,
alpha)), so :func:`_lars` solves for b / alpha at alpha 1 and scales the weights back.
"""

from __future__ import annotations

import warnings

import numpy as np

# The sizes only change the time (measured on 186,027 MiniLM embeddings, docs/text.md):
# the solution needs candidates from the whole range of correlations with b, so a large
# first working set does not save rounds, and adding the violators in small batches keeps
# each round's LARS small.
GROW = 300  # at most this many violators (the largest first) join per round
# Up to this many candidates one LARS over all of them is as fast as the rounds.
WHOLE_POOL = 15_000
RTOL = 1e-6  # a correlation above alpha * (1 + RTOL) violates optimality


def _lars(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    """Exact LASSO weights over the columns of ``a`` by scikit-learn's LARS."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LassoLars

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = LassoLars(alpha=1.0, fit_intercept=False, max_iter=20 * a.shape[0], fit_path=False)
        return np.ravel(fit.fit(a, b / alpha).coef_) * alpha


def lasso_working_set(
    vectors: np.ndarray,
    b: np.ndarray,
    alpha: float,
    candidates: np.ndarray | None = None,
    start: int | None = None,
    grow: int = GROW,
) -> tuple[np.ndarray, int]:
    """LASSO weights of ``candidates`` (row indices of ``vectors``; default all) for
    ``b``, and the number of rounds it took.

    The first working set is the ``start`` candidates most correlated with b; by default
    every candidate up to ``WHOLE_POOL`` of them (one round), else d.
    ``vectors`` is (n, d) float64, one candidate per row (C order: the whole-pool check
    is one product over contiguous memory). Each round solves LARS on the working set,
    then adds up to ``grow`` candidates whose correlation with the residual exceeds
    alpha (the largest first); it stops when none does, so the weights are the whole
    candidate set's solution.
    """
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    if vectors.dtype != np.float64 or b.dtype != np.float64:
        raise TypeError("lasso_working_set works in float64: pass float64 vectors and b")
    idx = np.arange(len(vectors)) if candidates is None else np.asarray(candidates)
    d = vectors.shape[1]
    corr = vectors @ b
    outside = np.zeros(len(vectors), dtype=bool)
    outside[idx] = True
    order = np.argsort(-np.abs(corr[idx]), kind="stable")
    if start is None:
        start = len(idx) if len(idx) <= WHOLE_POOL else d
    working = idx[order[:start]]
    outside[working] = False
    rounds = 0
    while True:
        rounds += 1
        sub = vectors[working]
        weights = _lars(sub.T, b, alpha)
        residual = b - weights @ sub
        corr = np.abs(vectors @ residual) / d
        violators = np.flatnonzero(outside & (corr > alpha * (1 + RTOL)))
        if len(violators) == 0:
            break
        violators = violators[np.argsort(-corr[violators], kind="stable")[:grow]]
        working = np.concatenate([working, violators])
        outside[violators] = False
    _check_optimal(sub, residual, weights, alpha)
    full = np.zeros(len(vectors))
    full[working] = weights
    return full[idx], rounds


def _check_optimal(
    sub: np.ndarray, residual: np.ndarray, weights: np.ndarray, alpha: float
) -> None:
    """The optimality conditions inside the working set (outside it the loop checked
    them): a zero weight's correlation at most alpha, a non-zero one's equal to alpha
    with the weight's sign. LARS can stop short (degenerate columns, its step limit);
    then the result is not the problem's solution, and that is an error, not a ranking."""
    corr = sub @ residual / sub.shape[1]
    zero = weights == 0
    excess = float(np.max(np.abs(corr[zero]) / alpha - 1, initial=-1.0))
    off = float(np.max(np.abs(corr[~zero] * np.sign(weights[~zero]) / alpha - 1), initial=0.0))
    if excess > RTOL or off > RTOL:
        raise RuntimeError(
            f"LARS stopped short of the LASSO's optimum (a correlation {excess:.2g} above "
            f"alpha, a non-zero weight's {off:.2g} off it): the weights are not the solution"
        )

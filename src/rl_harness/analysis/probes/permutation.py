"""A permutation null for a probe's held-out R²: is the fit better than chance pairings?

Each permutation pairs every episode's representations with another episode's targets (train
episodes shuffled among themselves for the refit, held-out episodes among themselves for the
score), refits the probe and scores it on the held-out episodes. Whole episodes move, so
what depends on the step index alone (e.g. a fixed reset belief) survives the shuffle and the
null is not flattered by it. All refits share one SVD of the train representations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

PERMUTATION_CHUNK = 32  # refits solved together (memory: chunk * n_train_steps * k floats)


@dataclass(frozen=True)
class PermutationNull:
    """The observed pooled R², the null distribution and the one-sided p-value."""

    observed: float
    null_r2_pooled: list[float]
    p_value: float  # (1 + #{null >= observed}) / (1 + n_permutations)

    def to_dict(self) -> dict[str, Any]:
        null = np.asarray(self.null_r2_pooled)
        return {
            "observed": self.observed,
            "p_value": self.p_value,
            "n_permutations": len(self.null_r2_pooled),
            "null_mean": float(null.mean()),
            "null_q95": float(np.quantile(null, 0.95)),
            "null_r2_pooled": self.null_r2_pooled,
        }


def _ridge_solver(x: np.ndarray, ridge: float) -> np.ndarray:
    """(d, n) map from centred targets to weights: min-norm (ridge) least squares via SVD."""
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    cutoff = s.max(initial=0.0) * max(x.shape) * np.finfo(np.float64).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(s > cutoff, s / (s**2 + ridge), 0.0)
    return (vt.T * gain) @ u.T


def permutation_null(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    *,
    observed: float,
    ridge: float,
    n_permutations: int,
    rng: np.random.Generator,
    include: np.ndarray | None = None,
) -> PermutationNull:
    """Null pooled R² of probes refit on episode-shuffled targets; arrays are (E, T, m).

    Permutation p draws `rng.permutation(n_train)` then `rng.permutation(n_test)`.
    `include` picks the targets the pooled R² uses (as in `scores`).
    """
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int):
        raise ValueError(f"n_permutations must be a positive int, got {n_permutations!r}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be a positive int, got {n_permutations!r}")
    n_train, _, d = x_train.shape
    n_test, k = x_test.shape[0], y_train.shape[2]
    keep = np.ones(k, dtype=bool) if include is None else np.asarray(include, dtype=bool)
    x = x_train.reshape(-1, d)
    x_mean = x.mean(axis=0)
    y_mean = y_train.reshape(-1, k).mean(axis=0)  # a shuffle leaves the mean alone
    solver = _ridge_solver(x - x_mean, ridge)
    x_test_c = x_test.reshape(-1, d) - x_mean
    flat_test = y_test.reshape(n_test, -1, k)
    sst = ((flat_test - flat_test.reshape(-1, k).mean(axis=0)) ** 2).sum(axis=(0, 1))
    orders = [(rng.permutation(n_train), rng.permutation(n_test)) for _ in range(n_permutations)]
    null = np.empty(n_permutations)
    for start in range(0, n_permutations, PERMUTATION_CHUNK):
        chunk = orders[start : start + PERMUTATION_CHUNK]
        targets = np.stack([y_train[train].reshape(-1, k) - y_mean for train, _ in chunk], 1)
        weights = (solver @ targets.reshape(len(x), -1)).reshape(d, len(chunk), k)
        predictions = np.einsum("nd,dpk->pnk", x_test_c, weights) + y_mean
        shuffled = np.stack([y_test[test].reshape(-1, k) for _, test in chunk])
        sse = ((shuffled - predictions) ** 2).sum(axis=1)  # (chunk, k)
        null[start : start + len(chunk)] = 1.0 - (sse * keep).sum(-1) / (sst * keep).sum()
    exceed = int(np.sum(null >= observed))
    return PermutationNull(
        observed=float(observed),
        null_r2_pooled=[float(v) for v in null],
        p_value=(1 + exceed) / (1 + n_permutations),
    )

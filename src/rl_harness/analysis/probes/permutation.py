"""Permutation nulls for a probe's held-out R²: is the fit better than chance pairings?

`permutation_null` (the global pooled R²): each permutation pairs every episode's
representations with another episode's targets (train episodes shuffled among themselves for
the refit, held-out episodes among themselves for the score), refits the probe and scores it
on the held-out episodes. Whole episodes move, so what depends on the step index alone (e.g.
a fixed reset belief) survives the shuffle and the null is not flattered by it. All refits
share one factorization of the train representations (`affine.ridge_solver`, the
solver `fit_affine` uses).

`conditional_permutation_null` (the within-branch pooled R²): is there information about the
target in the representation *beyond* the branch (e.g. the last k visible tokens)? Each
permutation shuffles the targets among the steps of the same branch, across episodes (train
steps among train steps, held-out among held-out), refits and scores the within-branch R²
on the held-out steps (`branches.within_scores`, as the probe report does). Branch means
and within-branch variances survive the shuffle; only the pairing of a representation with
its own target inside a branch is broken. Exact under the null when targets are
exchangeable within a branch; steps of one episode are correlated in time, which the
shuffle ignores, so read p as approximate for serially dependent data.

p-values are (1 + #{null >= observed}) / (1 + n_permutations): never below the floor
1 / (1 + n_permutations), which every record states (`p_value_floor`). A null value counts
as reaching the observed one within a relative 1e-9 (a refit on targets shuffled within
branches that the representation cannot tell apart gives the observed value up to rounding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_harness.analysis.probes.affine import RidgeSolver, ridge_solver
from rl_harness.analysis.probes.branches import BranchSums, branch_sums, within_scores

PERMUTATION_CHUNK = 32  # refits solved together (memory: chunk * n_train_steps * k floats)
TIE_TOLERANCE = 1e-9  # relative: a null value this close to the observed one reaches it
GLOBAL = "r2_pooled (targets shuffled between whole episodes)"
WITHIN = "within_branch r2_pooled (targets shuffled among steps of the same branch)"


@dataclass(frozen=True)
class PermutationNull:
    """The observed statistic, its null distribution and the one-sided p-value."""

    observed: float
    null_r2_pooled: list[float]  # the null values of `statistic`
    p_value: float  # (1 + #{null >= observed}) / (1 + n_permutations)
    statistic: str = GLOBAL

    @property
    def p_value_floor(self) -> float:
        """The smallest p-value this many permutations can give: 1 / (1 + n_permutations)."""
        return 1.0 / (1 + len(self.null_r2_pooled))

    def to_dict(self) -> dict[str, Any]:
        null = np.asarray(self.null_r2_pooled)
        return {
            "statistic": self.statistic,
            "observed": self.observed,
            "p_value": self.p_value,
            "p_value_floor": self.p_value_floor,
            "n_permutations": len(self.null_r2_pooled),
            "null_mean": float(null.mean()),
            "null_q95": float(np.quantile(null, 0.95)),
            "null_r2_pooled": self.null_r2_pooled,
        }


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
    solver: RidgeSolver | None = None,
) -> PermutationNull:
    """Null pooled R² of probes refit on episode-shuffled targets; arrays are (E, T, m).

    Permutation p draws `rng.permutation(n_train)` then `rng.permutation(n_test)`.
    `include` picks the targets the pooled R² uses (as in `scores`). `solver`: the
    factorization of `x_train` at `ridge` when the caller has it (`ridge_solver`).
    """
    _check_count(n_permutations)
    n_train, _, d = x_train.shape
    n_test, k = x_test.shape[0], y_train.shape[2]
    keep = np.ones(k, dtype=bool) if include is None else np.asarray(include, dtype=bool)
    solver = _solver(solver, x_train, ridge)  # one SVD for every refit
    y_mean = y_train.reshape(-1, k).mean(axis=0)  # a shuffle leaves the mean alone
    x_test_c = x_test.reshape(-1, d) - solver.x_mean
    flat_test = y_test.reshape(n_test, -1, k)
    sst = ((flat_test - flat_test.reshape(-1, k).mean(axis=0)) ** 2).sum(axis=(0, 1))
    orders = [(rng.permutation(n_train), rng.permutation(n_test)) for _ in range(n_permutations)]
    null = np.empty(n_permutations)
    for start in range(0, n_permutations, PERMUTATION_CHUNK):
        chunk = orders[start : start + PERMUTATION_CHUNK]
        targets = np.stack([y_train[train].reshape(-1, k) - y_mean for train, _ in chunk], 1)
        weights = solver.weights(targets.reshape(-1, len(chunk) * k)).reshape(d, len(chunk), k)
        predictions = np.einsum("nd,dpk->pnk", x_test_c, weights) + y_mean
        shuffled = np.stack([y_test[test].reshape(-1, k) for _, test in chunk])
        sse = ((shuffled - predictions) ** 2).sum(axis=1)  # (chunk, k)
        null[start : start + len(chunk)] = 1.0 - (sse * keep).sum(-1) / (sst * keep).sum()
    return _null(observed, null, GLOBAL)


def _solver(solver: RidgeSolver | None, x_train: np.ndarray, ridge: float) -> RidgeSolver:
    """The caller's factorization of the (E, T, d) train representations, else a new one."""
    if solver is None:
        return ridge_solver(x_train.reshape(-1, x_train.shape[2]), ridge)
    rows = x_train.shape[0] * x_train.shape[1]
    if solver.left.shape[0] != rows or solver.x_mean.shape[0] != x_train.shape[2]:
        raise ValueError("the solver was factored on representations of another shape")
    if solver.ridge != float(ridge):
        raise ValueError(f"the solver has ridge {solver.ridge}, the null asks {ridge}")
    return solver


def _null(observed: float, null: np.ndarray, statistic: str) -> PermutationNull:
    reach = observed - TIE_TOLERANCE * max(1.0, abs(observed))
    exceed = int(np.sum(null >= reach))
    return PermutationNull(
        observed=float(observed),
        null_r2_pooled=[float(v) for v in null],
        p_value=(1 + exceed) / (1 + len(null)),
        statistic=statistic,
    )


def _check_count(n_permutations: int) -> None:
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int):
        raise ValueError(f"n_permutations must be a positive int, got {n_permutations!r}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be a positive int, got {n_permutations!r}")


def within_branch_shuffle(branches: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An index array `order` (n,) such that `values[order]` shuffles `values` among the
    steps of each branch (labels (n,)): order[i] is a step of the same branch as i."""
    labels = np.asarray(branches).ravel()
    grouped = np.argsort(labels, kind="stable")  # each branch's steps in their own order
    shuffled = np.lexsort((rng.random(labels.size), labels))  # each branch's steps at random
    order = np.empty_like(grouped)
    order[grouped] = shuffled
    return order


def conditional_permutation_null(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    branches_train: np.ndarray,
    branches_test: np.ndarray,
    *,
    ridge: float,
    n_permutations: int,
    rng: np.random.Generator,
    include: np.ndarray | None = None,
    solver: RidgeSolver | None = None,
) -> PermutationNull:
    """Null of the held-out within-branch pooled R² when targets are shuffled among steps of
    the same branch (arrays (E, T, m), branch labels (E, T) on one labelling for train and
    test). The observed value is computed here by the same solver (unshuffled), so it and
    the null values differ only by the shuffle. Permutation p draws the train order, then
    the test order (`within_branch_shuffle`). `solver`: as in `permutation_null`."""
    _check_count(n_permutations)
    d, k = x_train.shape[2], y_train.shape[2]
    keep = np.ones(k, dtype=bool) if include is None else np.asarray(include, dtype=bool)
    solver = _solver(solver, x_train, ridge)  # one SVD for every refit
    y_flat = y_train.reshape(-1, k)
    y_mean = y_flat.mean(axis=0)  # a shuffle leaves the mean alone
    labels_train = np.asarray(branches_train).ravel()
    labels_test = np.asarray(branches_test).ravel()
    if labels_train.size != len(y_flat) or labels_test.size != y_test.shape[0] * y_test.shape[1]:
        raise ValueError("branch labels must cover the train and test steps, (E, T) each")
    # The held-out branch sums: a shuffle within branches leaves the counts, the branch
    # means and so the within-branch SST unchanged; only the squared errors change.
    held_out = branch_sums(y_test, y_test, np.reshape(labels_test, y_test.shape[:2])).total()
    if not (within_scores(held_out, keep).sst[0] * keep).sum() > 0:
        raise ValueError("the held-out targets never vary within branches: no within-branch R²")
    # Held-out steps sorted by branch (as branch_sums numbers them), so each refit's squared
    # errors sum per branch in one reduceat.
    _, index = np.unique(labels_test, return_inverse=True)
    by_branch = np.argsort(index.ravel(), kind="stable")
    starts = np.searchsorted(index.ravel()[by_branch], np.arange(held_out.count.shape[1]))
    x_test_c = x_test.reshape(-1, d)[by_branch] - solver.x_mean
    y_test_flat = y_test.reshape(-1, k)

    def within_r2(train_targets: np.ndarray, test_targets: np.ndarray) -> np.ndarray:
        """(P,) within-branch pooled R² of probes refit on (n_train, P * k) targets, scored
        on (P, n_test, k) held-out targets in branch order."""
        p = train_targets.shape[1] // k
        weights = solver.weights(train_targets).reshape(d, p, k)
        predictions = np.einsum("nd,dpk->pnk", x_test_c, weights) + y_mean
        errors = np.add.reduceat((test_targets - predictions) ** 2, starts, axis=1)
        sums = BranchSums(
            count=np.broadcast_to(held_out.count, (p, held_out.count.shape[1])),
            squared_error=errors,
            centered_sum=np.broadcast_to(held_out.centered_sum, errors.shape),
            centered_square=np.broadcast_to(held_out.centered_square, errors.shape),
        )
        return within_scores(sums, keep).r2_pooled

    observed = float(within_r2(y_flat - y_mean, y_test_flat[by_branch][None])[0])
    orders = [
        (within_branch_shuffle(labels_train, rng), within_branch_shuffle(labels_test, rng))
        for _ in range(n_permutations)
    ]
    null = np.empty(n_permutations)
    for start in range(0, n_permutations, PERMUTATION_CHUNK):
        chunk = orders[start : start + PERMUTATION_CHUNK]
        targets = np.stack([y_flat[train] - y_mean for train, _ in chunk], 1)
        shuffled = np.stack([y_test_flat[test[by_branch]] for _, test in chunk])
        null[start : start + len(chunk)] = within_r2(targets.reshape(len(y_flat), -1), shuffled)
    return _null(observed, null, WITHIN)

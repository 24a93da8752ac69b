"""Affine probes: least squares from a representation (n, d) plus a bias to targets (n, k)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def as_matrix(name: str, values: np.ndarray) -> np.ndarray:
    """A finite float64 (n, m) matrix, with an error that names the argument."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (n, m) matrix, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


@dataclass(frozen=True)
class AffineProbe:
    """prediction = representation @ weights + bias."""

    weights: np.ndarray  # (d, k)
    bias: np.ndarray  # (k,)
    ridge: float

    def predict(self, representations: np.ndarray) -> np.ndarray:
        x = as_matrix("representations", representations)
        if x.shape[1] != self.weights.shape[0]:
            raise ValueError(f"probe was fit on {self.weights.shape[0]} features, got {x.shape[1]}")
        return np.asarray(x @ self.weights + self.bias, dtype=np.float64)


@dataclass(frozen=True)
class RidgeSolver:
    """Ridge least squares on one representation matrix, factored once.

    `weights(centred_targets)` = V diag(s / (s² + ridge)) (Uᵀ centred_targets), from the
    SVD U diag(s) Vᵀ of the centred representations: the minimizer of |X W - Y|² +
    ridge |W|², and the minimum-norm least-squares solution when ridge = 0 and X is
    rank-deficient (singular values below max(n, d) * eps * s_max count as zero). Many
    target sets (a permutation null's refits) share the one factorization.
    """

    x_mean: np.ndarray  # (d,) the representations' mean, subtracted before the SVD
    ridge: float
    left: np.ndarray  # (n, r) U
    right: np.ndarray  # (d, r) V diag(s / (s² + ridge)), zero columns for dropped s

    def weights(self, centred_targets: np.ndarray) -> np.ndarray:
        """(d, m) weights for (n, m) targets centred on their own mean."""
        return np.asarray(self.right @ (self.left.T @ centred_targets), dtype=np.float64)


def _check_ridge(ridge: float) -> None:
    if not np.isfinite(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")


def _ridge_gain(s: np.ndarray, n: int, d: int, ridge: float) -> np.ndarray:
    """s / (s² + ridge) per singular value of an (n, d) matrix, 0 for those below
    max(n, d) * eps * s_max (numerically zero: the minimum-norm solution)."""
    cutoff = s.max(initial=0.0) * max(n, d) * np.finfo(np.float64).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        gain: np.ndarray = np.where(s > cutoff, s / (s**2 + ridge), 0.0)
    return gain


def ridge_solver(representations: np.ndarray, ridge: float = 0.0) -> RidgeSolver:
    """Factor (n, d) representations once for `RidgeSolver.weights`; ridge >= 0."""
    x = as_matrix("representations", representations)
    _check_ridge(ridge)
    x_mean = x.mean(axis=0)
    xc = x - x_mean
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    gain = _ridge_gain(s, xc.shape[0], xc.shape[1], ridge)
    return RidgeSolver(x_mean=x_mean, ridge=float(ridge), left=u, right=vt.T * gain)


def fit_affine(
    representations: np.ndarray,
    targets: np.ndarray,
    ridge: float = 0.0,
    *,
    solver: RidgeSolver | None = None,
) -> AffineProbe:
    """Least squares with a bias; `ridge` > 0 adds ridge * |W|^2 (the bias is not penalized).

    Centering first makes the bias exact and unpenalized; the weights come from
    `ridge_solver` (one SVD; minimum-norm for rank-deficient representations). `solver`:
    that factorization of these same representations at this ridge, already made (a probe
    and its permutation nulls share one).
    """
    x = as_matrix("representations", representations)
    y = as_matrix("targets", targets)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} representations but {y.shape[0]} targets")
    if solver is None:
        solver = ridge_solver(x, ridge)
    elif solver.left.shape[0] != x.shape[0] or solver.x_mean.shape[0] != x.shape[1]:
        raise ValueError("the solver was factored on representations of another shape")
    elif solver.ridge != float(ridge):
        raise ValueError(f"the solver has ridge {solver.ridge}, the fit asks {ridge}")
    y_mean = y.mean(axis=0)
    weights = solver.weights(y - y_mean)
    return AffineProbe(weights=weights, bias=y_mean - solver.x_mean @ weights, ridge=solver.ridge)


@dataclass(frozen=True)
class RowBlocks:
    """Ridge fits on unions of row blocks of one (x, y), each block factored once
    (`row_blocks`): per block its rows, the mean of [x | y] and the R of the QR of the
    centred [x | y]. A fit on any union of blocks (`block_ridge`) then costs a QR of the
    stacked small factors, not a pass over the rows: cross-fitting over k folds factors
    the rows once instead of k + 1 times."""

    sizes: np.ndarray  # (B,) rows per block
    means: np.ndarray  # (B, d + m) mean of [x | y] per block
    factors: tuple[np.ndarray, ...]  # R of the centred [x | y] per block, (<= d + m, d + m)
    n_features: int  # d


def row_blocks(x: np.ndarray, y: np.ndarray, blocks: Sequence[np.ndarray]) -> RowBlocks:
    """Factor (n, d) `x` and (n, m) `y` per block of row indices (each non-empty)."""
    x, y = as_matrix("x", x), as_matrix("y", y)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} rows of x but {y.shape[0]} of y")
    sizes, means, factors = [], [], []
    for rows in blocks:
        rows = np.asarray(rows)
        if rows.size == 0:
            raise ValueError("every row block needs at least one row")
        joined = np.concatenate([x[rows], y[rows]], axis=1)
        mean = joined.mean(axis=0)
        sizes.append(rows.size)
        means.append(mean)
        factors.append(np.linalg.qr(joined - mean, mode="r"))
    return RowBlocks(np.asarray(sizes), np.stack(means), tuple(factors), x.shape[1])


def block_ridge(
    blocks: RowBlocks, which: Sequence[int], ridge: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """(x mean (d,), weights (d, m)) of the ridge fit on the rows of blocks `which`: the same
    minimizer as `ridge_solver` on those rows (centred x, centred y, singular values below
    max(n, d) * eps * s_max dropped), to float rounding. The union's centred [x | y] has the
    R of the stacked block factors and sqrt(n_b) (mean_b - mean) rows (its Gram matrix is
    theirs, and QR keeps the singular values' precision), so R = [[R_x, z], [0, .]] with
    z = Qᵀ y and the SVD R_x = U S Vᵀ gives Uᵀ_full y = Uᵀ z."""
    _check_ridge(ridge)
    which = list(which)
    if not which:
        raise ValueError("a fit needs at least one block")
    sizes = blocks.sizes[which]
    n = int(sizes.sum())
    mean = (sizes[:, None] * blocks.means[which]).sum(axis=0) / n
    stacked = [blocks.factors[b] for b in which]
    stacked.append(np.sqrt(sizes)[:, None] * (blocks.means[which] - mean))
    r = np.linalg.qr(np.concatenate(stacked), mode="r")
    d = blocks.n_features
    u, s, vt = np.linalg.svd(r[:d, :d], full_matrices=False)
    weights = vt.T @ (_ridge_gain(s, n, d, ridge)[:, None] * (u.T @ r[:d, d:]))
    return mean[:d], np.asarray(weights, dtype=np.float64)


def fit_affine_by_qr(
    representations: np.ndarray, targets: np.ndarray, ridge: float = 0.0
) -> AffineProbe:
    """`fit_affine`'s probe to float rounding, from a QR of the rows (`block_ridge` on one
    block) instead of the SVD: for a fit made once (no permutation refits to share a row
    factor), about half the work on a wide representation."""
    x, y = as_matrix("representations", representations), as_matrix("targets", targets)
    blocks = row_blocks(x, y, [np.arange(x.shape[0])])
    x_mean, weights = block_ridge(blocks, [0], ridge)
    bias = blocks.means[0, x.shape[1] :] - x_mean @ weights
    return AffineProbe(weights=weights, bias=bias, ridge=float(ridge))

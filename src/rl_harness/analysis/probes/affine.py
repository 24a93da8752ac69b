"""Affine probes: least squares from a representation (n, d) plus a bias to targets (n, k)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg


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
        return x @ self.weights + self.bias


def fit_affine(representations: np.ndarray, targets: np.ndarray, ridge: float = 0.0) -> AffineProbe:
    """Least squares with a bias; `ridge` > 0 adds ridge * |W|^2 (the bias is not penalized).

    Centering first makes the bias exact and unpenalized. The ridge term is solved as
    ordinary least squares on rows augmented with sqrt(ridge) * I (stable, no normal
    equations); rank-deficient representations get the minimum-norm solution.
    """
    x = as_matrix("representations", representations)
    y = as_matrix("targets", targets)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{x.shape[0]} representations but {y.shape[0]} targets")
    if not np.isfinite(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")
    x_mean, y_mean = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - x_mean, y - y_mean
    if ridge > 0:
        d = x.shape[1]
        xc = np.vstack([xc, np.sqrt(ridge) * np.eye(d)])
        yc = np.vstack([yc, np.zeros((d, y.shape[1]))])
    weights = scipy.linalg.lstsq(xc, yc, lapack_driver="gelsd")[0]
    return AffineProbe(weights=weights, bias=y_mean - x_mean @ weights, ridge=float(ridge))

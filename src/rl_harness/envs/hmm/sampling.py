"""Inverse-CDF categorical draws from pre-drawn uniforms (shared by sampling and the envs)."""

from __future__ import annotations

import numpy as np


def cumulative(probabilities: np.ndarray) -> np.ndarray:
    """Cumulative sums along the last axis, scaled so each row ends at exactly 1.0.

    Dividing by the row total (x / x == 1.0 exactly) also makes trailing zero-probability
    categories end at 1.0, so a uniform in [0, 1) can never select them.
    """
    cum = np.cumsum(probabilities, axis=-1)
    return cum / cum[..., -1:]


class CategoricalTable:
    """Many fixed categorical distributions (rows), sampled by flat row index.

    `probabilities` has shape (..., m); row r is the r-th distribution in C order. The draw
    for uniform u is #{j < m - 1: u >= cum_j}. Thresholds are stored transposed, (m - 1, rows),
    so a batch gathers with one `np.take` and counts along the short leading axis.
    """

    def __init__(self, probabilities: np.ndarray) -> None:
        probabilities = np.asarray(probabilities, dtype=np.float64)
        cum = cumulative(probabilities).reshape(-1, probabilities.shape[-1])
        self.thresholds = np.ascontiguousarray(cum[:, :-1].T)

    def draw(self, rows: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """Category per (row, uniform) pair; rows and uniforms have the same shape (n,)."""
        return (uniforms >= np.take(self.thresholds, rows, axis=1)).sum(axis=0)

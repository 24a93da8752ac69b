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


def categorical(cum_rows: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Index drawn per row of `cum_rows` (n, m) by uniforms u (n,): #{j < m - 1: u >= cum_j}."""
    return (uniforms[:, None] >= cum_rows[:, :-1]).sum(axis=1)

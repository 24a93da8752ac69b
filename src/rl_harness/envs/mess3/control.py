"""The tilt of the occupancy-control task, as pure vectorized functions (shared by the task
and the solvers).

Action a = (a0, a1) tilts each row of a 3-state base chain B by displacement: with
theta = (0, a0, a1) and d(i, j) = (j - i) mod 3,

    U_a(j | i) = B(i, j) exp(theta[d(i, j)]) / sum_j' B(i, j') exp(theta[d(i, j')])
"""

from __future__ import annotations

import numpy as np

# DISPLACEMENT[i, j] = (j - i) mod 3: which tilt parameter acts on the move i -> j.
DISPLACEMENT = (np.arange(3)[None, :] - np.arange(3)[:, None]) % 3
DISPLACEMENT.flags.writeable = False


def tilt_parameters(actions: np.ndarray) -> np.ndarray:
    """theta = (0, a0, a1) for actions (..., 2): shape (..., 3)."""
    actions = np.asarray(actions, dtype=np.float64)
    theta = np.empty((*actions.shape[:-1], 3))
    theta[..., 0] = 0.0
    theta[..., 1:] = actions
    return theta


def tilted_transitions(
    base: np.ndarray, actions: np.ndarray, log_base: np.ndarray | None = None
) -> np.ndarray:
    """U_a for actions (..., 2): row-stochastic matrices (..., 3, 3), rows = from.
    `log_base` (log of base, -inf where 0) saves recomputing it on hot paths."""
    theta = tilt_parameters(actions)[..., DISPLACEMENT]  # (..., 3, 3)
    if log_base is None:
        with np.errstate(divide="ignore"):
            log_base = np.log(base)
    logits = log_base + theta
    logits -= logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    result: np.ndarray = weights / weights.sum(axis=-1, keepdims=True)
    return result


def row_kl(tilted: np.ndarray, base: np.ndarray) -> np.ndarray:
    """KL(tilted(. | i) || base(i, .)) in nats for every row: (..., 3, 3) -> (..., 3)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(tilted > 0, tilted * np.log(tilted / base), 0.0)
    return terms.sum(axis=-1)

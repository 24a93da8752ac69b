"""Numerical pieces the solvers share: action lattices, a batched bounded local search, and
stationary laws and differential values of finite chains (batched)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# The 8 compass directions of the pattern search.
_DIRECTIONS = np.array(
    [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [1, -1], [-1, 1], [-1, -1]], dtype=np.float64
)


def action_lattice(w_max: float, per_axis: int) -> np.ndarray:
    """The regular lattice of per_axis^2 actions on [-w_max, w_max]^2, shape (per_axis^2, 2)."""
    if per_axis < 2:
        raise ValueError(f"an action lattice needs at least 2 points per axis, got {per_axis}")
    axis = np.linspace(-w_max, w_max, per_axis)
    return np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)


def polish(
    objective: Callable[[np.ndarray], np.ndarray],
    start: np.ndarray,
    w_max: float,
    step: float,
    tolerance: float = 1e-7,
    max_rounds: int = 200,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Maximize B independent objectives over the box by a compass search from `start`.

    objective: actions (B, C, 2) -> values (B, C). Each problem moves to its best of 8
    neighbours at distance `step` while that improves, else halves its step, until every
    step is below `tolerance`. Returns the actions (B, 2), their values (B,) and whether
    every step got below `tolerance` within `max_rounds` (converged).
    """
    current = np.clip(np.asarray(start, dtype=np.float64), -w_max, w_max)
    value = objective(current[:, None])[:, 0]
    steps = np.full(len(current), float(step))
    for _ in range(max_rounds):
        active = steps >= tolerance
        if not active.any():
            break
        candidates = np.clip(
            current[:, None] + steps[:, None, None] * _DIRECTIONS[None], -w_max, w_max
        )
        values = objective(candidates)
        best = values.argmax(axis=1)
        best_value = values[np.arange(len(current)), best]
        better = active & (best_value > value)
        current = np.where(better[:, None], candidates[np.arange(len(current)), best], current)
        value = np.where(better, best_value, value)
        steps = np.where(better | ~active, steps, steps / 2)
    return current, value, bool((steps < tolerance).all())


def stationary(transitions: np.ndarray) -> np.ndarray:
    """Stationary laws of row-stochastic (..., S, S) chains with one recurrent class."""
    size = transitions.shape[-1]
    system = np.swapaxes(transitions, -1, -2) - np.eye(size)
    system[..., -1, :] = 1.0  # replace one balance equation by normalization
    target = np.zeros(transitions.shape[:-1])
    target[..., -1] = 1.0
    law = np.linalg.solve(system, target[..., None])[..., 0]
    return np.clip(law, 0.0, None) / np.clip(law, 0.0, None).sum(-1, keepdims=True)


def differential_values(
    transitions: np.ndarray, rewards: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Average reward rho, stationary law pi and differential values h (pi . h = 0) of one
    chain: rho + h = r + P h."""
    law = stationary(transitions)
    rho = float(law @ rewards)
    size = len(rewards)
    system = np.eye(size) - transitions + np.outer(np.ones(size), law)
    h = np.linalg.solve(system, rewards - rho)
    return rho, law, h

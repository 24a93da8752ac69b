"""Counterfactual beliefs b' (E, T, k) to edit towards: a corner of the simplex, or a belief
the process really reaches in another episode. Any (E, T, k) array works as well."""

from __future__ import annotations

import numpy as np


def corner_beliefs(targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Counterfactual beliefs (E, T, k): a uniformly drawn corner of the simplex per step."""
    shape = np.shape(targets)
    corners = rng.integers(0, shape[-1], size=shape[:-1])
    return np.eye(shape[-1])[corners]


def other_step_beliefs(targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Counterfactual beliefs (E, T, k): per step, the belief of a uniformly drawn step of
    another episode (so b' is a belief the process really reaches, unrelated to b)."""
    beliefs = np.asarray(targets, dtype=np.float64)
    episodes, steps = beliefs.shape[:2]
    if episodes < 2:
        raise ValueError("other steps' beliefs need at least 2 episodes")
    other = (np.arange(episodes)[:, None] + rng.integers(1, episodes, (episodes, steps))) % episodes
    result: np.ndarray = beliefs[other, rng.integers(0, steps, (episodes, steps))]
    return result

"""Train/test splits by episode: steps of one episode never sit on both sides."""

from __future__ import annotations

import numpy as np


def split_episodes(
    n_episodes: int, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) episode indices, each sorted; both sides hold at least one episode."""
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int) or n_episodes < 2:
        raise ValueError(f"an episode split needs at least 2 episodes, got {n_episodes!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    n_test = min(n_episodes - 1, max(1, round(test_fraction * n_episodes)))
    order = rng.permutation(n_episodes)
    return np.sort(order[n_test:]), np.sort(order[:n_test])

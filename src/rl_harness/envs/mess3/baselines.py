"""Expected per-step reward of Bayes-optimal agents, from exact beliefs.

Estimated by exact filtering of sampled sequences: the expectation over beliefs is a Monte
Carlo average, but the reward given each belief is exact (the max predicted probability, not
a sampled hit), so the variance is small. Deterministic for a fixed `seed`.

With `episode_length=L` the average is over the steps of an env episode (beliefs start at the
model's initial distribution, as at `HMMEnv.reset`); with None it is the long-run stationary
rate (after `burn_in` steps).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rl_harness.envs.hmm.beliefs import next_token_probabilities, sampled_beliefs
from rl_harness.envs.hmm.model import HMMModel


def _mean_over_beliefs(
    model: HMMModel,
    score: Callable[[np.ndarray], np.ndarray],
    episode_length: int | None,
    n_sequences: int,
    n_steps: int,
    burn_in: int,
    seed: int,
) -> float:
    if episode_length is not None:
        if episode_length < 1:
            raise ValueError(f"episode_length must be positive, got {episode_length}")
        n_steps, burn_in = episode_length, 0
    elif not 0 <= burn_in < n_steps:
        raise ValueError(f"burn_in must be in [0, n_steps), got {burn_in} and {n_steps}")
    _, beliefs = sampled_beliefs(model, n_sequences, n_steps, np.random.default_rng(seed))
    # beliefs[:, t] is what the agent acts on at step t; the last one is never acted on.
    return float(score(beliefs[:, burn_in:-1]).mean())


def bayes_optimal_next_token_reward(
    model: HMMModel,
    *,
    episode_length: int | None = None,
    n_sequences: int = 256,
    n_steps: int = 2048,
    burn_in: int = 256,
    seed: int = 0,
) -> float:
    """Expected NextTokenTask reward per step of predicting argmax_k P(next token = k | belief)."""

    def score(beliefs: np.ndarray) -> np.ndarray:
        return next_token_probabilities(model, beliefs).max(axis=-1)

    return _mean_over_beliefs(model, score, episode_length, n_sequences, n_steps, burn_in, seed)


def bayes_optimal_state_reward(
    model: HMMModel,
    *,
    episode_length: int | None = None,
    n_sequences: int = 256,
    n_steps: int = 2048,
    burn_in: int = 256,
    seed: int = 0,
) -> float:
    """Expected CurrentStateTask reward per step of guessing argmax_i belief_i."""

    def score(beliefs: np.ndarray) -> np.ndarray:
        return beliefs.max(axis=-1)

    return _mean_over_beliefs(model, score, episode_length, n_sequences, n_steps, burn_in, seed)

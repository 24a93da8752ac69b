"""What a task object supplies to `HMMEnv`: the action space, optional control, the reward.

The env owns the process (hidden state, tokens, history, beliefs, observations); a task owns
only what actions mean. Tasks are loaded from a "package.module:Class" string in env_config
and built as `Class(model, **task_kwargs)`. Every method works on batches of n env copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class Transition:
    """One step of n env copies: state_before --token--> state. All arrays (n,) int64."""

    state_before: np.ndarray
    token: np.ndarray
    state: np.ndarray


@runtime_checkable
class Task(Protocol):
    """The interface `HMMEnv` and `HMMVectorEnv` rely on."""

    # Discrete(n) with start 0; actions arrive validated as int64 arrays in [0, n).
    action_space: gym.spaces.Discrete
    # Names of the reward components `reward` returns, fixed so reset infos carry them too.
    reward_components: tuple[str, ...]

    def control_matrices(self) -> np.ndarray | None:
        """Token matrices per action, (n_actions, n_tokens, n_states, n_states), when actions
        change the dynamics; None when they do not (then the model's own matrices apply)."""
        ...

    def reward(
        self, actions: np.ndarray, transition: Transition
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Rewards (n,) float64 and each named component (n,) for a batch of steps."""
        ...

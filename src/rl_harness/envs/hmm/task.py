"""What a task object supplies to `HMMEnv`: the action space, optional control, the reward.

The env owns the process (hidden state, tokens, history, beliefs, observations); a task owns
only what actions mean. Tasks are loaded from a "package.module:Class" string in env_config
and built as `Class(model, **task_kwargs)`. Every method works on batches of n env copies.

Two kinds of task:
- `Task`: a `Discrete(n)` action space; actions may pick among fixed per-action token
  matrices (`control_matrices`).
- `ContinuousTask`: a 1-d `Box` action space; `control` maps each copy's (clipped) action to
  the executed action and the executed row-stochastic transition matrix. The env moves the
  hidden state by the row of the state before the move and draws the token from the model's
  emission of the state entered (the model must be Moore-form: emission by the next state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class Transition:
    """One step of n env copies: state_before --token--> state. Arrays (n,) int64.

    `transition_matrices` (n, n_states, n_states) is the executed transition of each copy
    (a `ContinuousTask`'s `Control.transition_matrices`); None for discrete tasks.
    """

    state_before: np.ndarray
    token: np.ndarray
    state: np.ndarray
    transition_matrices: np.ndarray | None = None


@dataclass(frozen=True)
class Control:
    """What a `ContinuousTask` executes for n copies: actions (n, *action_shape) float64 and
    row-stochastic transition matrices (n, n_states, n_states), rows = from, columns = to."""

    actions: np.ndarray
    transition_matrices: np.ndarray


@runtime_checkable
class Task(Protocol):
    """The interface `HMMEnv` and `HMMVectorEnv` rely on for discrete actions."""

    # Discrete(n) with start 0; actions arrive validated as int64 arrays in [0, n).
    action_space: gym.spaces.Discrete[np.int64]
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


@runtime_checkable
class ContinuousTask(Protocol):
    """A task whose `Box` action sets the hidden chain's transition at every step."""

    # A float Box of one dimension with finite bounds; actions arrive finite, of shape
    # (n, *shape), already clipped to the box.
    action_space: gym.spaces.Box
    reward_components: tuple[str, ...]

    def control(self, actions: np.ndarray) -> Control:
        """The executed actions and transition matrices of n copies (no per-copy loop)."""
        ...

    def reward(
        self, actions: np.ndarray, transition: Transition
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Rewards (n,) for executed `actions` and the move (with `transition_matrices`)."""
        ...

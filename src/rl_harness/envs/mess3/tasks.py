"""Tasks for `HMMEnv` (they work with any HMMModel; MESS3 is the intended one).

Timing: the agent acts after seeing the tokens up to now, whose exact belief is over the
current hidden state (the `state_before` of the coming move); the env then moves and emits.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from rl_harness.envs.hmm.model import HMMModel
from rl_harness.envs.hmm.task import Transition

# Rewards (n,) and named components (n,) each.
Reward = tuple[np.ndarray, dict[str, np.ndarray]]


class NextTokenTask:
    """Action = predicted next token; reward 1 when it is the token the move emits."""

    reward_components = ("correct",)

    def __init__(self, model: HMMModel) -> None:
        self.action_space = gym.spaces.Discrete(model.n_tokens)

    def control_matrices(self) -> None:
        return None

    def reward(self, actions: np.ndarray, transition: Transition) -> Reward:
        correct = (actions == transition.token).astype(np.float64)
        return correct, {"correct": correct}


class CurrentStateTask:
    """Action = guessed current hidden state; reward 1 when it is the state before the move."""

    reward_components = ("correct",)

    def __init__(self, model: HMMModel) -> None:
        self.action_space = gym.spaces.Discrete(model.n_states)

    def control_matrices(self) -> None:
        return None

    def reward(self, actions: np.ndarray, transition: Transition) -> Reward:
        correct = (actions == transition.state_before).astype(np.float64)
        return correct, {"correct": correct}


class PassiveTask:
    """Actions are ignored and the reward is 0: the agent only watches the process."""

    reward_components: tuple[str, ...] = ()

    def __init__(self, model: HMMModel, n_actions: int = 1) -> None:
        if n_actions < 1:
            raise ValueError(f"n_actions must be positive, got {n_actions}")
        self.action_space = gym.spaces.Discrete(n_actions)

    def control_matrices(self) -> None:
        return None

    def reward(self, actions: np.ndarray, transition: Transition) -> Reward:
        return np.zeros(actions.shape[0]), {}


class ControlledTask:
    """Actions tilt the hidden chain; reward is a per-state payoff minus an optional KL cost.

    Action a < n_states multiplies the weight of entering state a by exp(tilt) and
    renormalizes each row: P_a[i, j] = P[i, j] w_a[j] / Z_a[i]; the last action
    (a = n_states) leaves the chain alone. Token probabilities given a move are unchanged,
    so T_a[k, i, j] = T[k, i, j] w_a[j] / Z_a[i]. Reward for the move i -> j under action a:
    state_rewards[j] - kl_cost * KL(P_a[i] || P[i]) (in nats).
    """

    reward_components = ("state_reward", "kl_cost")

    def __init__(
        self,
        model: HMMModel,
        tilt: float,
        state_rewards: Sequence[float],
        kl_cost: float = 0.0,
    ) -> None:
        n = model.n_states
        rewards = np.asarray(state_rewards, dtype=np.float64)
        if rewards.shape != (n,) or not np.all(np.isfinite(rewards)):
            raise ValueError(f"state_rewards must be {n} finite numbers, got {state_rewards!r}")
        if not np.isfinite(tilt) or not np.isfinite(kl_cost) or kl_cost < 0:
            raise ValueError(f"tilt must be finite and kl_cost >= 0, got {tilt}, {kl_cost}")
        self.action_space = gym.spaces.Discrete(n + 1)
        self._state_rewards = rewards
        self._kl_cost = float(kl_cost)
        weights = np.ones((n + 1, n))
        weights[np.arange(n), np.arange(n)] = np.exp(tilt)  # last row: passive action
        p = model.transition_matrix
        normalizer = p @ weights.T  # (n_states, n_actions): Z_a[i]
        tilted = p[None] * weights[:, None, :] / normalizer.T[:, :, None]  # (a, i, j)
        self._controls = model.token_matrices[None] * (tilted / np.where(p > 0, p, 1.0))[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.where(tilted > 0, np.log(tilted / p[None]), 0.0)
        self.kl = (tilted * log_ratio).sum(axis=2)  # (n_actions, n_states)

    def control_matrices(self) -> np.ndarray:
        return self._controls

    def reward(self, actions: np.ndarray, transition: Transition) -> Reward:
        state_reward = self._state_rewards[transition.state]
        cost = self._kl_cost * self.kl[actions, transition.state_before]
        return state_reward - cost, {"state_reward": state_reward, "kl_cost": cost}

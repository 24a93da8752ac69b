"""Tasks for `HMMEnv` (they work with any HMMModel; MESS3 is the intended one).
`OccupancyControlTask` is continuous: a Box action tilts a 3-state chain.

Timing: the agent acts after seeing the tokens up to now, whose exact belief is over the
current hidden state (the `state_before` of the coming move); the env then moves and emits.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from rl_harness.envs.hmm.model import HMMModel
from rl_harness.envs.hmm.task import Control, Transition
from rl_harness.envs.mess3.control import tilted_transitions

# Rewards (n,) and named components (n,) each.
Reward = tuple[np.ndarray, dict[str, np.ndarray]]


class NextTokenTask:
    """Action = predicted next token; reward 1 when it is the token the move emits."""

    reward_components = ("correct",)

    def __init__(self, model: HMMModel) -> None:
        self.action_space: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(model.n_tokens)

    def control_matrices(self) -> None:
        return None

    def reward(self, actions: np.ndarray, transition: Transition) -> Reward:
        correct = (actions == transition.token).astype(np.float64)
        return correct, {"correct": correct}


class CurrentStateTask:
    """Action = guessed current hidden state; reward 1 when it is the state before the move."""

    reward_components = ("correct",)

    def __init__(self, model: HMMModel) -> None:
        self.action_space: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(model.n_states)

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
        self.action_space: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(n_actions)

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
        self.action_space: gym.spaces.Discrete[np.int64] = gym.spaces.Discrete(n + 1)
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


class OccupancyControlTask:
    """Steer the hidden chain with a continuous tilt; paid for time in `occupancy_states`.

    The model's transition matrix is the base chain B (the study uses
    `control_chain_model(alpha)`: the fixed control chain with MESS3 emissions); it
    must have 3 states. Action a = (a0, a1) in [-w_max, w_max]^2 (out-of-range actions are
    clipped by the env) executes U_a (see `rl_harness.envs.mess3.control`). Reward for the
    step that leaves state s:

        1[s in occupancy_states] - KL(U_a(. | s) || B(s, .)) / beta - action_cost * |a|

    Components: "occupancy", "transition_kl" (the KL in nats, unscaled), "kl_penalty"
    (KL / beta; 0 when beta is None), "action_penalty" (action_cost * |a|, Euclidean norm).
    """

    reward_components = ("occupancy", "transition_kl", "kl_penalty", "action_penalty")

    def __init__(
        self,
        model: HMMModel,
        w_max: float,
        beta: float | None = None,
        occupancy_states: Sequence[int] = (2,),
        action_cost: float = 0.0,
    ) -> None:
        if model.n_states != 3:
            raise ValueError(f"OccupancyControlTask needs a 3-state chain, got {model.n_states}")
        if isinstance(w_max, bool) or not isinstance(w_max, int | float) or not w_max > 0:
            raise ValueError(f"w_max must be a positive number, got {w_max!r}")
        if not np.isfinite(w_max):
            raise ValueError(f"w_max must be finite, got {w_max!r}")
        if beta is not None and (
            isinstance(beta, bool)
            or not isinstance(beta, int | float)
            or not (np.isfinite(beta) and beta > 0)
        ):
            raise ValueError(f"beta must be a positive number or None (no penalty), got {beta!r}")
        states = tuple(occupancy_states) if isinstance(occupancy_states, Sequence) else None
        if (
            not states
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in states)
            or not all(0 <= i < 3 for i in states)
            or len(set(states)) != len(states)
        ):
            raise ValueError(
                f"occupancy_states must be distinct states of the chain (0, 1, 2), "
                f"got {occupancy_states!r}"
            )
        if isinstance(action_cost, bool) or not isinstance(action_cost, int | float):
            raise ValueError(f"action_cost must be a number >= 0, got {action_cost!r}")
        if not (np.isfinite(action_cost) and action_cost >= 0):
            raise ValueError(f"action_cost must be a number >= 0, got {action_cost!r}")
        self.w_max = float(w_max)
        self.beta = None if beta is None else float(beta)
        self.occupancy_states = states
        self.action_cost = float(action_cost)
        self.base = model.transition_matrix
        with np.errstate(divide="ignore"):
            self._log_base = np.log(self.base)
        self._positive = bool((self.base > 0).all())  # then every tilted entry is > 0 too
        self.action_space = gym.spaces.Box(-self.w_max, self.w_max, (2,), np.float32)
        occupied = np.zeros(3)
        occupied[list(states)] = 1.0
        self.occupancy = occupied  # (3,): the per-state payoff
        self._copies: np.ndarray = np.arange(0)

    def control(self, actions: np.ndarray) -> Control:
        return Control(actions, tilted_transitions(self.base, actions, self._log_base))

    def reward(self, actions: np.ndarray, transition: Transition) -> Reward:
        before = transition.state_before
        if self._copies.shape[0] != before.shape[0]:
            self._copies = np.arange(before.shape[0])
        matrices = transition.transition_matrices
        assert matrices is not None  # a ContinuousTask's moves always carry them (task.py)
        rows = matrices[self._copies, before]  # (n, 3)
        if self._positive:
            terms = rows * (np.log(rows) - self._log_base[before])
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = np.where(rows > 0, rows * np.log(rows / self.base[before]), 0.0)
        kl = np.maximum(terms.sum(axis=1), 0.0)  # rounding can leave -1e-17
        occupancy = self.occupancy[before]
        penalty = kl / self.beta if self.beta is not None else np.zeros_like(kl)
        if self.action_cost:
            action_penalty = self.action_cost * np.sqrt((actions * actions).sum(axis=1))
        else:
            action_penalty = np.zeros_like(kl)
        return occupancy - penalty - action_penalty, {
            "occupancy": occupancy,
            "transition_kl": kl,
            "kl_penalty": penalty,
            "action_penalty": action_penalty,
        }

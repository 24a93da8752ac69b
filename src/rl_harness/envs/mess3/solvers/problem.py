"""`OccupancyProblem`: the parameters of the occupancy-control task, and its per-step terms."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rl_harness.envs.mess3.control import (
    DISPLACEMENT,
    row_kl,
    tilt_parameters,
    tilted_transitions,
)
from rl_harness.envs.mess3.model import (
    control_chain_model,
    control_chain_transition,
    mess3_emission,
)
from rl_harness.envs.mess3.tasks import OccupancyControlTask


@dataclass(frozen=True)
class OccupancyProblem:
    """The control chain with MESS3 emissions (alpha) under `OccupancyControlTask`'s reward.

    `mixing` slows the base chain (`control_chain_transition`; 1: the fixed control chain).
    Validated like the task (one-line ValueError). `env_config(delay)` builds the matching
    env_config, so a solver's policy can be run in the real env.
    """

    alpha: float
    w_max: float
    beta: float | None = None
    occupancy_states: tuple[int, ...] = (2,)
    action_cost: float = 0.0
    mixing: float = 1.0
    base: np.ndarray = field(init=False, repr=False, compare=False)
    emission: np.ndarray = field(init=False, repr=False, compare=False)
    occupancy: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "occupancy_states", tuple(self.occupancy_states))
        model = control_chain_model(self.alpha, self.mixing)
        task = OccupancyControlTask(
            model,
            self.w_max,
            self.beta,
            self.occupancy_states,
            self.action_cost,
        )
        object.__setattr__(self, "base", control_chain_transition(self.mixing))
        object.__setattr__(self, "emission", mess3_emission(self.alpha))
        object.__setattr__(self, "occupancy", task.occupancy)

    def settings(self) -> dict[str, Any]:
        values = {k: v for k, v in asdict(self).items() if k in _FIELDS}
        values["occupancy_states"] = list(self.occupancy_states)
        if self.mixing == 1.0:  # the fixed chain keeps its old cache keys and records
            del values["mixing"]
        return values

    def step_terms(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For actions (..., 2): the tilted chains U_a (..., 3, 3) and the reward of leaving
        each state, occupancy - KL / beta - action_cost * |a|, shape (..., 3)."""
        actions = np.asarray(actions, dtype=np.float64)
        tilted = tilted_transitions(self.base, actions)
        reward = np.broadcast_to(self.occupancy, tilted.shape[:-1]).copy()
        if self.beta is not None:
            reward -= row_kl(tilted, self.base) / self.beta
        if self.action_cost:
            reward -= self.action_cost * np.sqrt((actions * actions).sum(-1))[..., None]
        return tilted, reward

    def step_gradients(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Derivatives of `step_terms` in the action, for actions (..., 2): dU (..., 2, 3, 3)
        and d reward (..., 2, 3), axis -3 / -2 the action component.

        With theta = (0, a0, a1) and M_m[i, j] = 1[d(i, j) = m + 1] (which moves a_m tilts):
        dU(j | i)/da_m = U(j | i) (M_m[i, j] - sum_j' U(j' | i) M_m[i, j']), and since
        log(U / B) = theta_d - log Z, dKL_i/da_m = sum_j dU(j | i)/da_m theta[d(i, j)].
        The action cost's |a| gets its gradient a / |a| (0 at a = 0).
        """
        actions = np.asarray(actions, dtype=np.float64)
        tilted = tilted_transitions(self.base, actions)[..., None, :, :]  # (..., 1, 3, 3)
        moves = (DISPLACEMENT[None] == np.array([1, 2])[:, None, None]).astype(np.float64)
        d_tilted = tilted * (moves - (tilted * moves).sum(-1, keepdims=True))  # (..., 2, 3, 3)
        d_reward = np.zeros(d_tilted.shape[:-1])
        if self.beta is not None:
            theta = tilt_parameters(actions)[..., DISPLACEMENT][..., None, :, :]
            d_reward -= (d_tilted * theta).sum(-1) / self.beta
        if self.action_cost:
            norm = np.sqrt((actions * actions).sum(-1, keepdims=True))
            unit = actions / np.where(norm > 0, norm, 1.0)
            d_reward -= self.action_cost * unit[..., None]
        return d_tilted, d_reward

    def env_config(self, delay: int, **overrides: Any) -> dict[str, Any]:
        """The env_config of this problem at observation delay `delay` (plus overrides)."""
        task_kwargs: dict[str, Any] = {"w_max": self.w_max, "beta": self.beta}
        task_kwargs["occupancy_states"] = list(self.occupancy_states)
        task_kwargs["action_cost"] = self.action_cost
        config = {
            "model": "rl_harness.envs.mess3:control_chain_model",
            "model_kwargs": {"alpha": self.alpha}
            | ({"mixing": self.mixing} if self.mixing != 1.0 else {}),
            "task": "rl_harness.envs.mess3.tasks:OccupancyControlTask",
            "task_kwargs": task_kwargs,
            "observation_delay": delay,
        }
        return config | overrides


_FIELDS = ("alpha", "w_max", "beta", "occupancy_states", "action_cost", "mixing")

"""`HMMVectorEnv`: N copies of `HMMEnv` stepped in one batched NumPy call.

Autoreset is gymnasium's next-step mode (what RLlib 2.60 expects): the step after a copy's
episode ends resets that copy, ignores its action and returns reward 0. Infos are in
gymnasium's vector form (each key an (N, ...) array with an "_key" mask).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rl_harness.envs.hmm.config import HMMEnvConfig, resolve_config
from rl_harness.envs.hmm.simulator import BatchSimulator, Observation


class HMMVectorEnv(VectorEnv[Observation, Any, np.ndarray]):
    """The batched counterpart of `HMMEnv`; `reset(seed=s)` seeds copy i with s + i."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int,
        env_config: Mapping[str, Any] | HMMEnvConfig | None = None,
        **kwargs: Any,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        self.config = resolve_config(env_config, kwargs)
        self._sim = BatchSimulator(self.config, num_envs)
        self.num_envs = num_envs
        self.model = self._sim.model
        self.task = self._sim.task
        self.layout = self._sim.layout
        # {name: (slice, shape)}: `split_observation(flat_obs, env.parts)` gives the Dict form.
        self.parts = self._sim.parts
        self.single_observation_space = self._sim.observation_space
        self.single_action_space = self._sim.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._started = False

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Observation, dict[str, Any]]:
        if options:
            raise ValueError(f"HMMVectorEnv.reset takes no options, got {sorted(options)}")
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, bool):  # list(True) would fail the same way, less clearly
            raise TypeError(f"seed must be an int or a list of seeds, got {seed!r}")
        elif isinstance(seed, int | np.integer):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        super().reset(seed=seed if isinstance(seed, int) else None)
        self._started = True
        return self._sim.reset(seeds)

    def step(
        self, actions: Any
    ) -> tuple[Observation, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        return self._sim.step(self._sim.check_actions(actions))

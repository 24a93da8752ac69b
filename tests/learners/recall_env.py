"""A memory task for tests: repeat a cue that was shown only at the first step.

At reset the agent sees a cue c in [0, V) (one-hot, Box (V + 1,)); every later
observation is the same blank (index V). At every step the action earns 1 if it
equals c. An agent with memory scores `episode_len`; a memoryless policy sees the
cue at step 0 only, so its best expected return is 1 + (episode_len - 1) / V.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class RecallEnv(gym.Env):
    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.vocab = int(config.get("vocab", 4))
        self.episode_len = int(config.get("episode_len", 8))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.vocab + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(self.vocab)

    def _obs(self, index: int) -> np.ndarray:
        obs = np.zeros(self.vocab + 1, np.float32)
        obs[index] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(self.vocab))
        self._t = 0
        return self._obs(self._cue), {}

    def step(self, action):
        reward = float(int(action) == self._cue)
        self._t += 1
        return self._obs(self.vocab), reward, False, self._t >= self.episode_len, {}

    def memoryless_best_return(self) -> float:
        return 1.0 + (self.episode_len - 1) / self.vocab

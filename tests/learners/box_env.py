"""A tiny continuous-control env for tests: put the action on a target the agent saw.

The target is a point in [-0.5, 0.5]^dim, redrawn each step. The observation is
a window Box (window, dim) of the last `window` targets, newest last, so every
model (flat, recurrent, window) can read it; the action is Box(-1, 1, (dim,))
and the reward -mean((action - target)^2): a memoryless map solves it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class TargetTrackingEnv(gym.Env):
    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.dim = int(config.get("dim", 2))
        self.window = int(config.get("window", 2))
        self.episode_len = int(config.get("episode_len", 32))
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (self.window, self.dim), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (self.dim,), np.float32)

    def _draw(self) -> None:
        target = self.np_random.uniform(-0.5, 0.5, self.dim).astype(np.float32)
        self._targets = np.concatenate([self._targets[1:], target[None]])

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._targets = np.zeros((self.window, self.dim), np.float32)
        self._draw()
        self._t = 0
        return self._targets.copy(), {}

    def step(self, action):
        action = np.asarray(action, np.float32)
        if action.shape != (self.dim,):
            raise ValueError(f"action must have shape ({self.dim},), got {action.shape}")
        reward = -float(np.mean((action - self._targets[-1]) ** 2))
        self._draw()
        self._t += 1
        return self._targets.copy(), reward, False, self._t >= self.episode_len, {}

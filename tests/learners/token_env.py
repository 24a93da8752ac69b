"""A tiny token env for tests: predict the next token of a noisy counter.

Tokens follow t' = (t + 1) % V with probability `p_step`, otherwise uniform.
The observation is a one-hot window of the last W tokens, Box (W, V); the
action guesses the next token (reward 1 if right); info["token"] is the token
the latest transition emitted, so info[t + 1]["token"] is the next-token
target of the action at step t.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class NoisyCounterEnv(gym.Env):
    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.vocab = int(config.get("vocab", 3))
        self.window = int(config.get("window", 4))
        self.p_step = float(config.get("p_step", 0.9))
        self.episode_len = int(config.get("episode_len", 32))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (self.window, self.vocab), np.float32)
        self.action_space = gym.spaces.Discrete(self.vocab)
        self._tokens: list[int] = []

    def _obs(self) -> np.ndarray:
        obs = np.zeros((self.window, self.vocab), np.float32)
        obs[np.arange(self.window), self._tokens[-self.window :]] = 1.0
        return obs

    def _emit(self) -> int:
        if self.np_random.random() < self.p_step:
            return (self._tokens[-1] + 1) % self.vocab
        return int(self.np_random.integers(self.vocab))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._tokens = [int(self.np_random.integers(self.vocab))]
        for _ in range(self.window - 1):
            self._tokens.append(self._emit())
        self._t = 0
        return self._obs(), {"token": self._tokens[-1]}

    def step(self, action):
        token = self._emit()
        self._tokens.append(token)
        self._tokens = self._tokens[-self.window :]
        self._t += 1
        reward = float(int(action) == token)
        return self._obs(), reward, False, self._t >= self.episode_len, {"token": token}

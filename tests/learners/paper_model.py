"""The original study's transformer (the token-guess paper's: 4 layers, 1 head of width 8,
newest token first, learned positions) as a model config, for the learners' tests."""

from __future__ import annotations

import gymnasium as gym

ACT3 = gym.spaces.Discrete(3)
PAPER_CONFIG = {
    "context_len": 10,
    "feature_dim": 3,
    "newest_first": True,
    "d_model": 64,
    "num_layers": 4,
    "num_heads": 1,
    "d_head": 8,
    "ff_dim": 256,
    "mlp_activation": "relu",
    "positions": "learned",
}

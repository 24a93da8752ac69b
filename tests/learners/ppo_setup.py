"""A lean PPO config (NoisyCounterEnv by default) for the integration tests (2 CPUs, seconds)."""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from tests.learners.token_env import NoisyCounterEnv


def tiny_ppo_config(
    module_class: type,
    model_config: dict[str, Any],
    *,
    env: type = NoisyCounterEnv,
    env_config: dict[str, Any] | None = None,
    seed: int = 0,
    learners: dict[str, Any] | None = None,
    **training: Any,
) -> PPOConfig:
    """`learners` goes to config.learners (learner_class, learner_connector, ...)."""
    training = {
        "train_batch_size_per_learner": 128,
        "minibatch_size": 64,
        "num_epochs": 1,
        "lr": 1e-3,
    } | training
    return (
        PPOConfig()
        .environment(env, env_config=env_config or {})
        .env_runners(num_env_runners=0, rollout_fragment_length=64)
        .training(**training)
        .learners(**(learners or {}))
        .rl_module(
            rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config)
        )
        .debugging(seed=seed)
    )


def flat_params(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).clone() for p in module.parameters()])

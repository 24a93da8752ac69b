"""What every training leaf of the study runs unless it says otherwise: the budgets, the agent,
the sampling and the optimizer.

A leaf's experiment.py builds its config from `ppo_config` and states only its difference
(`ppo`: PPO's loss settings; `supervised`: its next-token learner; `ppo_default_init`: `ppo`
with another initialisation); `tests/study/test_token_guess_configs.py` checks that each
leaf's config is this one but for what it states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_token_guess import shared
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import TransformerActorCritic, batched_acting


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps (= guessed tokens) per iteration
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    num_envs: int  # vectorized env copies per env runner
    probe_episodes: int  # probe episodes at every checkpoint (a quarter held out)
    warmup_steps: int  # played before recording, so the 10-token window is full
    probe_steps: int  # recorded steps per probe episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval


# One small iteration and small probes: checks the recipe end to end.
SMOKE = Budget(
    iterations=1,
    train_batch=1024,
    minibatch=256,
    num_epochs=1,
    num_envs=8,
    probe_episodes=8,
    warmup_steps=16,
    probe_steps=32,
    n_bootstrap=50,
)
# CPU default: meant to fit 30 minutes end to end on 2 cores (measured: study README).
CPU = Budget(
    iterations=24,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=32,
    probe_episodes=64,
    warmup_steps=16,
    probe_steps=256,
    n_bootstrap=1000,
)
# 77 x 32,768 = 2,523,136 env steps (>= 2.5M): `--budget full` (a GPU recommended).
FULL = Budget(
    iterations=77,
    train_batch=32_768,
    minibatch=4096,
    num_epochs=6,
    num_envs=64,
    probe_episodes=256,
    warmup_steps=16,
    probe_steps=256,
    n_bootstrap=1000,
)
# Chosen by name (`--budget NAME`, `--smoke` = smoke), never by the hardware plan.
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}
DEFAULT_BUDGET = "cpu"

# The belief-geometry paper's transformer on the env's newest-first 10-token window.
MODEL_CONFIG = {
    # The original study's initialisation (issue 37): trunk weights N(0, 0.02), trunk biases
    # 0, input projection without a bias, policy and value heads at PyTorch's scale.
    "init": "normal",
    "init_std": 0.02,
    "pi_output_scale": 1.0,
    "vf_output_scale": 1.0,
    "context_len": shared.TOKEN_WINDOW,
    "feature_dim": 3,  # MESS3 tokens, one-hot: each position is one token
    "newest_first": True,
    "d_model": 64,
    "num_layers": 4,
    "num_heads": 1,
    "d_head": 8,
    "ff_dim": 256,
    "mlp_activation": "relu",
    "positions": "learned",
    "final_norm": True,
    # The learner computes each distinct window prefix of a minibatch once: the same
    # function and parameters as per-window, several times faster (docs/performance.md).
    "train_forward": "prefix_shared",
}


def module_spec(model_config: Mapping[str, Any] = MODEL_CONFIG) -> RLModuleSpec:
    """The agent: the paper's transformer; its post-final-norm residual is what we probe."""
    return RLModuleSpec(module_class=TransformerActorCritic, model_config=dict(model_config))


def ppo_config(
    plan: Budget, *, info: Sequence[str] = (), model_config: Mapping[str, Any] = MODEL_CONFIG
) -> PPOConfig:
    """A fresh PPOConfig (a caller's edits never leak into the next run): the env with the
    `info` keys, sampling, batches, the optimizer and the agent of `model_config`; no loss
    settings (each leaf states its loss)."""
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=shared.env_config(info=info))
        .env_runners(
            num_envs_per_env_runner=plan.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            # A guess never changes the process, so gamma 0 and lambda 0 are exact (the
            # advantage is the reward less the value); the supervised loss uses neither, and
            # keeps them so that sampling is the same.
            lr=1e-4,
            gamma=0.0,
            lambda_=0.0,
            entropy_coeff=0.0,
        )
        .rl_module(rl_module_spec=module_spec(model_config))
    )
    # Acting batched per vector step (RLlib's default pieces in fewer Python hops; the same
    # episodes: tests/study/test_batched_sampling.py).
    return batched_acting(config)

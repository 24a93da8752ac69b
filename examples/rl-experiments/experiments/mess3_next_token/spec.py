"""What both leaves of the study run unless they say otherwise: the budgets, the agent and PPO.

A leaf's experiment.py builds its config from `ppo_config` and states only its difference
(`next_token_aux`: its head, target and learner); `tests/study/test_next_token_configs.py`
checks that each leaf's config is this one but for what it states.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_next_token import shared
from rl_harness.envs.hmm import ENV_ID


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps per iteration (train_batch_size_per_learner)
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    num_envs: int  # vectorized envs; each collects train_batch / num_envs steps per iteration
    probe_episodes: int  # episodes rolled out for the probe (a quarter held out for scoring)
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval


# One tiny iteration and a small probe: checks the recipe end to end.
SMOKE = Budget(
    iterations=1,
    train_batch=256,
    minibatch=128,
    num_epochs=1,
    num_envs=4,
    probe_episodes=32,
    n_bootstrap=200,
)
# 60 iterations of 4096 steps = 245,760 env steps (measured times: the study README).
FULL = Budget(
    iterations=60,
    train_batch=4096,
    minibatch=512,
    num_epochs=4,
    num_envs=64,
    probe_episodes=256,
    n_bootstrap=1000,
)
# Chosen by name (`--smoke` = `--budget smoke`); this study has no separate CPU budget.
BUDGETS = {"smoke": SMOKE, "full": FULL}
DEFAULT_BUDGET = "full"

# The agent: a GRU actor-critic; its hidden state is what the probe reads.
MODEL_CONFIG = {"max_seq_len": 32, "hidden_size": 64}


def ppo_config(budget: Budget, module_spec: RLModuleSpec) -> PPOConfig:
    """A fresh PPOConfig (a caller's edits never leak into the next run) of the study's PPO
    on the next-token env (the token in info) with the agent `module_spec`."""
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=shared.env_config(info=["token"]))
        .env_runners(
            num_envs_per_env_runner=budget.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
            # One whole 64-step episode per env and fragment: no episode is cut mid-way.
            rollout_fragment_length=budget.train_batch // budget.num_envs,
        )
        .training(
            train_batch_size_per_learner=budget.train_batch,
            minibatch_size=budget.minibatch,
            num_epochs=budget.num_epochs,
            lr=1e-3,
            # Actions never change the process or later observations, so each step's reward
            # is all an action earns: gamma = 0 is exact and keeps advantages low-variance.
            gamma=0.0,
            lambda_=0.0,
        )
        .rl_module(rl_module_spec=module_spec)
    )

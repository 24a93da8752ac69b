"""What both leaves run unless they say otherwise: the budgets, the agent, PPO and the
sampling, each at the original's setting (`mess3_reward_state_action_symmetry_cycle_1`,
experiment repo Al-does/alex-rl-experiments, `shared.py`; original_figures.json names the
commits), and every choice that differs from it, recorded here.

The leaves state only their variant, their delay and their budgets: `variant_2` (delay 1,
the original's 10M env steps: its `battery` run's variant 2) and `variant_2_no_delay`
(delay 0, the original's 1M: `EXPLORATORY_ENV_STEPS`). tests/study/test_action_symmetry_configs.py
checks each number here against the original's and each leaf's config against this one.

Choices that differ from the original (docs/migrating.md, "the action-symmetry family"):

- start law, reward timing, KL, previous-action wiring, entropy: the original's (uniform
  start, the state a move leaves, RLlib's default KL term 0.2 kept, the previous action in
  the observation, entropy 0.003): not differences; tested.
- model: `StatefulTransformerActorCritic` with the original's sizes (d_model 96, 3 layers,
  4 heads, a 64-step context, 32-step training chunks) and initialisation (N(0, 0.02)
  trunk, heads at PyTorch's scale); it carries a key/value cache instead of the old
  model's raw-input context (docs/migrating.md).
- the env emits no token at reset (the original did), so the first decision of an episode
  sees no token.
- sampling: `num_envs` copies on the hardware plan's env runners (the original: 8 runners x
  48 copies, or 24 copies per runner on a 12-core host); a train batch is exactly
  `train_batch` steps (RLlib's many runners overshot it: 33,077 per iteration), so the
  original's stop at >= N sampled steps is `iterations` = ceil(N / 32,768) here. Exact
  because each copy's share of a batch (`train_batch / num_envs` with the CPU plan's one
  env runner) is a whole number of episodes: RLlib counts no step for a copy's reset and
  stops at the first vector step that reaches the batch, so otherwise an iteration
  overshoots by up to `num_envs - 1` (the smoke's 16 copies counted 2,048 then 2,062;
  docs/migrating.md, "Env steps per iteration"). tests/study/test_sampled_steps.py counts
  them through RLlib's env runner.
- probes: each checkpoint's own greedy rollouts, `probe_episodes` episodes from reset of
  `probe_steps` recorded steps after `warmup_steps` (the original: 16 copies run on
  through episode ends, 60,000 steps fitted and 80,000 held out on a second stream); a
  held-out share of 4/7 of the episodes as the original's 80,000 of 140,000 steps;
  within-branch figures over branches of equal last 2 visible tokens (the original's
  depth 2, but with every branch, not only those of 50+ steps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_action_symmetry import task

# By name too (not `task.X`): the budgets' slice (--show-settings) then needs no gymnasium.
from experiments.mess3_action_symmetry.task import EPISODE_LENGTH
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import StatefulTransformerActorCritic, store_kv_steps


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each): ceil(original env steps / batch)
    train_batch: int  # env steps per iteration
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    lr: float  # Adam learning rate (the original's smoke used another)
    num_envs: int  # vectorized env copies per env runner
    probe_episodes: int  # closed-loop probe episodes per checkpoint (4/7 held out)
    warmup_steps: int  # played before recording (the original's warm-up)
    probe_steps: int  # recorded steps per probe episode
    probe_envs: int  # probe episodes stepped at once
    n_bootstrap: int  # bootstrap resamples of the held-out episodes
    n_permutations: int  # whole-episode permutation null of each checkpoint's pooled R²
    oracle_copies: int  # env copies of the one-step oracle's 1024-step closed-loop run


def iterations_for(env_steps: int, train_batch: int) -> int:
    """The original stopped at the first iteration with >= `env_steps` sampled steps."""
    return math.ceil(env_steps / train_batch)


ORIGINAL_TRAIN_BATCH = 32_768
ORIGINAL_WARMUP = 64
# The probe's recorded steps: the rest of a 1024-step episode after the warm-up.
EPISODE_STEPS_AFTER_WARMUP = EPISODE_LENGTH - ORIGINAL_WARMUP
ORIGINAL_MINIBATCH = 2048

# The original's smoke: 4,096 env steps in batches of 2,048 (minibatch 256, lr 3e-4).
SMOKE = Budget(
    iterations=iterations_for(4096, 2048),
    train_batch=2048,
    minibatch=256,
    num_epochs=6,
    lr=3e-4,
    # Two copies: 1,024 steps each per batch, one episode, so both iterations count exactly
    # 2,048 env steps (16 copies overshot to 2,062; see the module docstring).
    num_envs=2,
    probe_episodes=8,
    warmup_steps=4,  # the original's smoke warm-up
    probe_steps=32,
    probe_envs=8,
    n_bootstrap=100,  # the original's smoke resamples
    n_permutations=20,
    oracle_copies=16,
)


def original(env_steps: int) -> Budget:
    """The original's budget for `env_steps` (10M: `variant_2`; 1M: `variant_2_no_delay`):
    its batch, minibatch, epochs and lr; its probe size (140,000 recorded steps after a
    64-step warm-up: here 146 episodes x 960) and its 1,000 resamples and permutations."""
    return Budget(
        iterations=iterations_for(env_steps, ORIGINAL_TRAIN_BATCH),
        train_batch=ORIGINAL_TRAIN_BATCH,
        minibatch=ORIGINAL_MINIBATCH,
        num_epochs=6,
        lr=4.2e-4,
        num_envs=32,
        probe_episodes=146,
        warmup_steps=ORIGINAL_WARMUP,
        probe_steps=EPISODE_STEPS_AFTER_WARMUP,
        probe_envs=73,
        n_bootstrap=1000,
        n_permutations=1000,
        oracle_copies=256,
    )


# The agent: the original's transformer sizes and initialisation.
MODEL_CONFIG: Mapping[str, Any] = {
    "d_model": 96,
    "num_layers": 3,
    "num_heads": 4,
    "context": 64,  # steps each position attends to, itself included (the old context_len)
    "max_seq_len": 32,  # RLlib's training chunk (the old TransformerModelConfig default)
    "prev_action": False,  # the observation already holds it (action_window 1)
    # The original transformer's initialisation (docs/architecture.md).
    "init": "normal",
    "init_std": 0.02,
    "pi_output_scale": 1.0,
    "vf_output_scale": 1.0,
}


def module_spec() -> RLModuleSpec:
    return RLModuleSpec(
        module_class=StatefulTransformerActorCritic, model_config=dict(MODEL_CONFIG)
    )


def ppo_config(plan: Budget, *, variant: int, delay: int) -> PPOConfig:
    """A fresh PPOConfig (a caller's edits never leak into the next run): the original's PPO
    on the env of `variant` at `delay`."""
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=task.env_config(variant, delay))
        .env_runners(
            num_envs_per_env_runner=plan.num_envs,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            lr=plan.lr,
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.2,
            vf_loss_coeff=0.5,
            entropy_coeff=0.003,
            # The original set no KL option, so RLlib's default term (coefficient 0.2) was
            # on: stated here, never copied from a study that turned it off.
            use_kl_loss=True,
            kl_coeff=0.2,
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
        )
        .rl_module(rl_module_spec=module_spec())
    )
    # Episodes store each step's new key/value, not the whole 63-step cache: without it
    # RLlib keeps ~4.7 GB of caches per batch (10-13 GiB RSS in the first run, 2026-12-07).
    return store_kv_steps(config)

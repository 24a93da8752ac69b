"""Does PPO, rewarded only for predicting MESS3's next token, learn the exact Bayesian belief?

What it shows: a PPO agent with a GRU sees only the newest MESS3 token (x = 0.05,
alpha = 0.85) and earns 1 for each correctly predicted next token. It reaches the
Bayes-optimal reward, and an affine probe of its GRU state recovers the exact belief over
the three hidden states (from env info) on held-out episodes, with no loss term that asks
for it. `next_token_aux` is the same experiment plus a next-token prediction loss.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_next_token.reward_only.experiment --smoke
    uv run rl-harness experiments.mess3_next_token.reward_only.experiment

Writes results/<run-id>/probe_metrics.json, belief_simplex.png and learning_curve.png.

Results measured so far (with how and when): the study README.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_next_token import shared
from rl_harness import RunContext, run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import GRUActorCritic


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
# 60 iterations of 4096 steps = 245,760 env steps: 1410 s in issue 5's run, with the other
# leaf training beside it on the same 2 busy cores (not a quiet-machine figure).
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


def module_spec() -> RLModuleSpec:
    """The agent: a GRU actor-critic; its hidden state is what the probe reads."""
    return RLModuleSpec(
        module_class=GRUActorCritic,
        model_config={"max_seq_len": 32, "hidden_size": 64},
    )


def build_config(budget: Budget) -> PPOConfig:
    """A fresh PPOConfig for this leaf: a caller's edits never leak into the next run."""
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
        .rl_module(rl_module_spec=module_spec())
    )


def run(context: RunContext) -> dict:
    budget: Budget = context.settings  # BUDGETS[--budget], --set applied (the harness)
    result = run_algorithm(build_config(budget), context, stop=budget.iterations)
    record = shared.analyze(
        context,
        label="reward_only",
        module_spec=module_spec(),
        aux_weight=0.0,
        plan=budget,
    )
    return shared.summary(result, record)

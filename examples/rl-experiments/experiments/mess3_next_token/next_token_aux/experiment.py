"""Does a next-token prediction loss make PPO's belief representation in MESS3 sharper?

What it shows: the `reward_only` experiment (PPO with a GRU that sees only the newest MESS3
token, x = 0.05, alpha = 0.85, rewarded for predicting the next one) plus one change: a
linear next-token classifier head on the GRU state, trained with cross-entropy against the
token the env emits next (info["token"] one step ahead, written into the train batch by
InfoTargetsToBatch) and added to PPO's loss with weight AUX_WEIGHT. The probe of the GRU
state against the exact belief then leaves less variance unexplained than without the loss.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_next_token.next_token_aux.experiment --smoke
    uv run rl-harness experiments.mess3_next_token.next_token_aux.experiment

Writes results/<run-id>/probe_metrics.json, belief_simplex.png and learning_curve.png (which
also plots the head's accuracy against the Bayes-optimal ceiling).

Results measured so far (with how and when): the study README.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_next_token import shared
from rl_harness import RunContext, run_algorithm
from rl_harness.envs.hmm import ENV_ID
from rl_harness.learners.models import GRUActorCritic, NextTokenAuxHeadMixin
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin

AUX_WEIGHT = 1.0  # next-token cross-entropy weight in the learner's total loss
# The head's target: info["token"] one step ahead, i.e. the token the env emits next.
AUX_TARGETS = {"next_token_aux": {"info_key": "token", "shift": 1}}


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
# 60 iterations of 4096 steps = 245,760 env steps: 1376 s in issue 5's run, with the other
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


class NextTokenAuxGRU(NextTokenAuxHeadMixin, GRUActorCritic):
    """The GRU actor-critic plus a next-token classifier on its representation."""


class NextTokenAuxPPOLearner(NextTokenAuxLossMixin, PPOTorchLearner):
    """PPO's loss plus next_token_aux/weight * next-token cross-entropy."""


def module_spec() -> RLModuleSpec:
    """The agent: the GRU actor-critic plus the next-token head (3 MESS3 tokens)."""
    return RLModuleSpec(
        module_class=NextTokenAuxGRU,
        model_config={"max_seq_len": 32, "hidden_size": 64, "next_token_aux/num_classes": 3},
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
        .learners(
            learner_class=NextTokenAuxPPOLearner,
            learner_config_dict={"next_token_aux/weight": AUX_WEIGHT},
            learner_connector=functools.partial(InfoTargetsToBatch, targets=AUX_TARGETS),
        )
        .rl_module(rl_module_spec=module_spec())
    )


def run(context: RunContext) -> dict:
    budget: Budget = context.settings  # BUDGETS[--budget], --set applied (the harness)
    result = run_algorithm(build_config(budget), context, stop=budget.iterations)
    record = shared.analyze(
        context,
        label="next_token_aux",
        module_spec=module_spec(),
        aux_weight=AUX_WEIGHT,
        plan=budget,
    )
    return shared.summary(result, record)

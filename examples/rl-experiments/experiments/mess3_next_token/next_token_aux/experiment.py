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

Budgets, PPO and the GRU: the study's spec (spec.py), as `reward_only`'s (tested).
Results measured so far (with how and when): the study README.
"""

from __future__ import annotations

import functools

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_next_token import shared, spec
from experiments.mess3_next_token.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    SMOKE,  # noqa: F401
    Budget,
)
from rl_harness import Recipe, Results, RunContext, run_algorithm
from rl_harness.learners.models import GRUActorCritic, NextTokenAuxHeadMixin
from rl_harness.losses import InfoTargetsToBatch, NextTokenAuxLossMixin

AUX_WEIGHT = 1.0  # next-token cross-entropy weight in the learner's total loss
# The head's target: info["token"] one step ahead, i.e. the token the env emits next.
AUX_TARGETS = {"next_token_aux": {"info_key": "token", "shift": 1}}


class NextTokenAuxGRU(NextTokenAuxHeadMixin, GRUActorCritic):
    """The GRU actor-critic plus a next-token classifier on its representation."""


class NextTokenAuxPPOLearner(NextTokenAuxLossMixin, PPOTorchLearner):
    """PPO's loss plus next_token_aux/weight * next-token cross-entropy."""


def module_spec() -> RLModuleSpec:
    """The agent: the GRU actor-critic plus the next-token head (3 MESS3 tokens)."""
    return RLModuleSpec(
        module_class=NextTokenAuxGRU,
        model_config=spec.MODEL_CONFIG | {"next_token_aux/num_classes": 3},
    )


def build_config(budget: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's PPO with the head's agent, target and learner."""
    return spec.ppo_config(budget, module_spec()).learners(
        learner_class=NextTokenAuxPPOLearner,
        learner_config_dict={"next_token_aux/weight": AUX_WEIGHT},
        learner_connector=functools.partial(InfoTargetsToBatch, targets=AUX_TARGETS),
    )


def run(context: RunContext[Budget]) -> Results:
    budget = context.settings  # the chosen budget, --set applied (the harness)
    result = run_algorithm(build_config(budget), context, stop=budget.iterations)
    record = shared.analyze(
        context,
        label="next_token_aux",
        module_spec=module_spec(),
        aux_weight=AUX_WEIGHT,
        plan=budget,
    )
    return shared.summary(result, record)


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)

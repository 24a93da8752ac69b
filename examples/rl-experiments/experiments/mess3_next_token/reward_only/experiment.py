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

Budgets, PPO and agent: the study's spec (spec.py), unchanged.
Results measured so far (with how and when): the study README.
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig
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
from rl_harness.learners.models import GRUActorCritic


def module_spec() -> RLModuleSpec:
    """The agent: a GRU actor-critic; its hidden state is what the probe reads."""
    return RLModuleSpec(module_class=GRUActorCritic, model_config=dict(spec.MODEL_CONFIG))


def build_config(budget: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's PPO with the plain GRU agent."""
    return spec.ppo_config(budget, module_spec())


def run(context: RunContext[Budget]) -> Results:
    budget = context.settings  # the chosen budget, --set applied (the harness)
    result = run_algorithm(build_config(budget), context, stop=budget.iterations)
    record = shared.analyze(
        context,
        label="reward_only",
        module_spec=module_spec(),
        aux_weight=0.0,
        plan=budget,
    )
    return shared.summary(result, record)


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)

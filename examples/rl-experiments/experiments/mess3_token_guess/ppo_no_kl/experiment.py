"""The KL ablation: the `ppo` leaf without RLlib's KL term, the original study's PPO.

What it shows: everything is `ppo`'s (env, agent and its original initialisation, PPO
settings, budgets, checkpoints, analysis: this module imports them) except
`use_kl_loss=False`. The `ppo` runs keep RLlib's KL term (coefficient 0.2); the original
study's PPO had none. Issue 52 item 5 asks for 3 seeds of this arm at the CPU budget,
paired with `ppo` seed by seed; not trained yet (study README).

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_token_guess.ppo_no_kl.experiment --smoke
    for seed in 0 1 2; do
        uv run rl-harness experiments.mess3_token_guess.ppo_no_kl.experiment --seed $seed
    done

Writes what `ppo` writes (label "ppo_no_kl").
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_token_guess.ppo import experiment as ppo
from experiments.mess3_token_guess.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    CPU,  # noqa: F401
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    MODEL_CONFIG,
    SMOKE,  # noqa: F401
    Budget,
)
from rl_harness import Recipe, RunContext


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: `ppo`'s without the KL term."""
    return ppo.build_config(plan, MODEL_CONFIG).training(use_kl_loss=False)


# ppo's analysis under this leaf's label: what run() does after training (ppo.run).
ANALYSIS_STAGES = ppo.analysis_stages("ppo_no_kl")


def run(context: RunContext[Budget]) -> dict:
    return ppo.run(context, model_config=MODEL_CONFIG, label="ppo_no_kl", build=build_config)


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)

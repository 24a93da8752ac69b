"""The init ablation: the `ppo` leaf with the library's default initialisation.

What it shows: everything is `ppo`'s (env, agent architecture, PPO settings, budgets,
checkpoints, analysis: this module imports them) except the module's initialisation, stated
here in full: the PyTorch-default trunk (each layer's own init, learned positions N(0, 0.02),
an input projection with a bias) and a policy head whose last layer is scaled by 0.01,
instead of the original study's N(0, 0.02) trunk with zero biases and default-scale heads.
Issue 37 measured the gap on one seed; this leaf measures it on the study's seeds, paired
with `ppo` seed by seed in the synthesis.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_token_guess.ppo_default_init.experiment --smoke
    uv run rl-harness experiments.mess3_token_guess.ppo_default_init.experiment --seed 0

Writes what `ppo` writes (label "ppo_default_init").
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_token_guess import spec
from experiments.mess3_token_guess.ppo import experiment as ppo
from experiments.mess3_token_guess.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    CPU,  # noqa: F401
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    SMOKE,  # noqa: F401
    Budget,
)
from rl_harness import Recipe, RunContext

INIT_KEYS = ("init", "init_std", "pi_output_scale", "vf_output_scale")

# ppo's model with the library's default initialisation, every key stated.
MODEL_CONFIG = {
    **{key: value for key, value in spec.MODEL_CONFIG.items() if key not in INIT_KEYS},
    "init": "torch_default",
    "pi_output_scale": 0.01,
    "vf_output_scale": 1.0,
}


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: `ppo`'s with this leaf's MODEL_CONFIG."""
    return ppo.build_config(plan, MODEL_CONFIG)


# ppo's analysis under this leaf's label: what run() does after training (ppo.run).
ANALYSIS_STAGES = ppo.analysis_stages("ppo_default_init")


def run(context: RunContext[Budget]) -> dict:
    return ppo.run(context, model_config=MODEL_CONFIG, label="ppo_default_init")


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)

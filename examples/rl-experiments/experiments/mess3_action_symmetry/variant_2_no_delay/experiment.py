"""Variant 2 at delay 0: with the current token visible, does PPO learn the one-step
oracle's conditioned policy (noop when the belief puts more than 0.7541 on state 2)?

The original's `variant_2_no_delay` (experiment repo Al-does/alex-rl-experiments,
`mess3_reward_state_action_symmetry_cycle_1`, run 20260728T183456Z-17b402c4, seed 42, 1M
env steps): variant 2 of the action-symmetry task (the `variant_2` leaf's) with no
observation delay, so the decision sees the token of the state the chain is in and the
belief can pass 0.7541. Its agent learned the conditioned policy by 528k env steps (greedy
noop on 67.8% of steps in hidden state 2, under 5% in states 0 and 1; agreement with the
oracle 0.963; occupancy 0.2597). Analysis: shared.analyze.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_action_symmetry.variant_2_no_delay.experiment --smoke
    uv run rl-harness experiments.mess3_action_symmetry.variant_2_no_delay.experiment --seed 42

Budgets: `smoke` (the original's smoke), `full` (the default: the original's 1M env steps,
31 iterations of 32,768). Writes what `variant_2` writes (label "variant_2_no_delay").
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_action_symmetry import shared, spec

# The budgets by name from spec (not `spec.X`): --show-settings reads them without torch.
from experiments.mess3_action_symmetry.spec import SMOKE, Budget, original
from rl_harness import Recipe, RunContext

LEAF = shared.Leaf(label="variant_2_no_delay", variant=2, delay=0)
ORIGINAL_ENV_STEPS = 1_000_000  # the original's EXPLORATORY_ENV_STEPS


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's, on variant 2 at delay 0."""
    return spec.ppo_config(plan, variant=LEAF.variant, delay=LEAF.delay)


# What run() does after training, in order; `rl-harness analyze` runs the same.
ANALYSIS_STAGES = shared.stages(LEAF)


def run(context: RunContext[Budget]) -> dict:
    return shared.train_and_analyse(context, LEAF, build_config(context.settings), ANALYSIS_STAGES)


RECIPE = Recipe(
    run=run,
    budgets={"smoke": SMOKE, "full": original(ORIGINAL_ENV_STEPS)},
    default="full",
    headline=("reward_state_2_fraction_greedy", "oracle_agreement_greedy", "probe_r2"),
    stages=ANALYSIS_STAGES,
)

"""Variant 2 at delay 1: does PPO learn the one-step oracle's policy when its noop region is
out of reach?

The original action-symmetry study's variant 2 (experiment repo Al-does/alex-rl-experiments,
`mess3_reward_state_action_symmetry_cycle_1`, run in its `battery` leaf at 10M env steps,
seed 42): the control chain with a noop, a positive action (+1.5 on the log-odds of
entering state 2 from states 0 and 1, -1.5 from state 2) and a negative one (-1.5 from
every row); reward 1 for leaving state 2; the agent sees the newest token one step late
(delay 1) and its previous action, through the original's stateful transformer and PPO
(task.py, spec.py). At delay 1 every decision belief has passed through a controlled move,
so P(s = 2) <= 0.3324 < 0.7541, where noop starts beating the positive action one step
ahead: the one-step oracle always takes the positive action. The original's agent ended
there (greedy positive on every step by 264k env steps, occupancy 0.2567) while its probe
MSE grew over training. Analysis: shared.analyze (every checkpoint on its own play).

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_action_symmetry.variant_2.experiment --smoke
    uv run rl-harness experiments.mess3_action_symmetry.variant_2.experiment --seed 42
    uv run rl-harness experiments.mess3_action_symmetry.variant_2.experiment --seed 42 \
        --budget full   # the original's 10M env steps (306 iterations)

Budgets: `smoke` (the original's smoke: 2 x 2,048 steps), `cpu` (the default: 31
iterations, 1,015,808 env steps, everything else the original's; the original's record has
a checkpoint at 1,058,450 steps to compare), `full` (the original's 10M: 306 iterations).
Writes results/<run-id>/probe_metrics.json; result.json holds shared.summary. Results to
expect: the study README.
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_action_symmetry import shared, spec

# The budgets by name from spec (not `spec.X`): --show-settings reads them without torch.
from experiments.mess3_action_symmetry.spec import SMOKE, Budget, original
from rl_harness import Recipe, RunContext

LEAF = shared.Leaf(label="variant_2", variant=2, delay=1)
ORIGINAL_ENV_STEPS = 10_000_000  # the original's TOTAL_ENV_STEPS when its battery ran
CPU_ENV_STEPS = 1_000_000  # the original's budget of the delay-0 leaf: a matched checkpoint


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's, on variant 2 at delay 1."""
    return spec.ppo_config(plan, variant=LEAF.variant, delay=LEAF.delay)


# What run() does after training, in order; `rl-harness analyze` runs the same.
ANALYSIS_STAGES = shared.stages(LEAF)


def run(context: RunContext[Budget]) -> dict:
    return shared.train_and_analyse(context, LEAF, build_config(context.settings), ANALYSIS_STAGES)


RECIPE = Recipe(
    run=run,
    budgets={
        "smoke": SMOKE,
        "cpu": original(CPU_ENV_STEPS),
        "full": original(ORIGINAL_ENV_STEPS),
    },
    default="cpu",
    headline=("reward_state_2_fraction_greedy", "oracle_agreement_greedy", "probe_r2"),
    stages=ANALYSIS_STAGES,
)

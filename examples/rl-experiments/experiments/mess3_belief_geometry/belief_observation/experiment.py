"""Control: the occupancy-control agent is handed the decision belief in its observation.

What it shows: the `reward_only` experiment with one change: the env appends the decision
belief (the exact distribution of the state now given the tokens seen and the agent's own
executed actions; env_config include_decision_belief) to the observation. Tracking the
belief is then no longer the agent's job, so its return should approach the belief-MDP
ceiling (solver_values.json: belief_mdp): it bounds what the reward-only agent can reach at
this budget and architecture. Its probe R² is high by construction (the belief is an input),
so it is a ceiling for the probe too, not a finding.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_belief_geometry.belief_observation.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.belief_observation.experiment
    uv run rl-harness experiments.mess3_belief_geometry.belief_observation.experiment \
        --budget full --hardware-profile single-gpu   # FULL: 10M env steps, the original's budget

Writes what `reward_only` writes, without the interventions. Budgets, PPO and agent: the spec
(spec.py), as `reward_only`'s; this leaf changes only the observation (tested).
Results: the study README (run ids, dates, the measured times of each budget).
"""

from __future__ import annotations

from ray.rllib.algorithms.ppo import PPOConfig

from experiments.mess3_belief_geometry import analysis, spec, task
from experiments.mess3_belief_geometry.spec import (  # noqa lines: tests and tools read them here
    BUDGETS,
    CPU,  # noqa: F401
    DEFAULT_BUDGET,
    FULL,  # noqa: F401
    MODEL_CONFIG,  # noqa: F401
    SMOKE,  # noqa: F401
    Budget,
    module_spec,
)
from rl_harness import Recipe, RunContext, run_algorithm
from rl_harness.analysis import run_stages


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's, with the decision belief in the observation."""
    env_config = task.env_config(
        info=[], decision_belief_in_observation=True, point=task.point_of(plan)
    )
    return spec.ppo_config(plan, env_config=env_config, module_spec=module_spec())


# What run() does after training, in order; `rl-harness analyze` runs the same on a
# finished run (analysis.stages).
ANALYSIS_STAGES = analysis.stages(
    label="belief_observation",
    module_spec=module_spec(),
    decision_belief_in_observation=True,
)


def run(context: RunContext[Budget]) -> dict:
    plan = context.settings  # the chosen budget, --set applied (the harness)
    run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=analysis.checkpoint_schedule(plan),
    )
    return dict(run_stages(context, ANALYSIS_STAGES)["result"].record or {})


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=ANALYSIS_STAGES)

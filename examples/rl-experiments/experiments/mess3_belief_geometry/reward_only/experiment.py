"""Does a PPO agent that steers MESS3, rewarded only by the task, track the decision belief?

What it shows: the agent sets a 2-d tilt of the hidden chain each step (clipped to
[-5, 5]^2) and is paid 1 for each step in the rare state 2 minus the KL cost of steering / 4;
it sees the MESS3 tokens one step late (delay 1) and its own previous action. Memory is
worth a lot here: the best memoryless policy and the best policy on the last 2 visible
tokens sit well below the belief-MDP ceiling (solver_values.json). The question: does the
agent climb above them, and does an affine probe of its representation recover the decision
belief (the exact distribution of the state now given what it has seen and done), also
within branches of equal last visible tokens, where a memoryless reading cannot?

Agent, PPO and budgets: the study's spec, unchanged (spec.py: the original study's agent, a
causal transformer that carries its own context, StatefulTransformerActorCritic: width 96,
3 layers, 4 heads, 64-step context, trained on 64-step chunks, reading the env's observation,
newest visible token and its own previous action, one step at a time).

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_belief_geometry.reward_only.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.reward_only.experiment
    uv run rl-harness experiments.mess3_belief_geometry.reward_only.experiment \
        --budget full --hardware-profile single-gpu   # FULL: 10M env steps, the original's budget

Writes results/<run-id>/probe_metrics.json (schema in analysis.py), solver_values.json,
belief_simplex.png, learning_curve.png, r2_over_training.png, and interventions.json with
interventions.png (the probed belief edited, the action shift against the belief-MDP
policy's: interventions.run_interventions, docs/interventions.md); result.json holds return
per step (sampled, greedy) against the solver values and the probe R² (global, within
branches) against the controls (untrained module replayed on the agent's rollouts, raw
observation, window baselines k = 1..window_k_max), with paired differences and nulls.
Checkpoints: step 0 and the first iteration past each doubling of env steps
(`analysis.checkpoint_schedule`), replayed for the R²-over-training figure.

Budgets (`BUDGETS`, chosen by name, never by the hardware): `--smoke` (= `--budget smoke`)
SMOKE, `--budget cpu` CPU (the default), `--budget full` FULL; `--set KEY=VALUE` changes one
setting, `--show-settings` lists them all.
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

# The closing console line, in this order: reward per step (greedy evaluation) and its share
# of the belief-MDP ceiling, then the within-branch probe R² of the agent and of the
# untrained control (everything else is in result.json).
HEADLINE = (
    "return_per_step/greedy",
    "fraction_of_belief_mdp/greedy",
    "probe_r2_within_branch",
    "untrained_r2_within_branch",
)


def build_config(plan: Budget) -> PPOConfig:
    """A fresh PPOConfig: the study's PPO and agent on the task at the plan's task_point, no
    info in the batch."""
    env_config = task.env_config(info=[], point=task.point_of(plan))
    return spec.ppo_config(plan, env_config=env_config, module_spec=module_spec())


# What run() does after training, in order; `rl-harness analyze` runs the same on a
# finished run (analysis.stages).
ANALYSIS_STAGES = analysis.stages(
    label="reward_only", module_spec=module_spec(), interventions=True
)


def run(context: RunContext[Budget]) -> dict:
    plan = context.settings  # BUDGETS[--budget], --set applied (the harness)
    run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_schedule=analysis.checkpoint_schedule(plan),
    )
    return dict(run_stages(context, ANALYSIS_STAGES)["result"].record or {})


RECIPE = Recipe(
    run=run,
    budgets=BUDGETS,
    default=DEFAULT_BUDGET,
    headline=HEADLINE,
    stages=ANALYSIS_STAGES,
)

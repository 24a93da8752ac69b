"""`reward_only` at the operating point where memory pays (issue 52, item 2).

What it shows: the same agent, PPO and analysis as `reward_only` (its experiment.py), on the
task at `task.TASK_POINTS["memory"]` instead of the flagship's parameters: there the best
table on the last 3 visible tokens earns a far smaller share of the belief-MDP ceiling and a
window of the last 6 tokens and actions predicts far less of the decision belief within
branches (operating_point.py found the point with the exact solvers before any training;
its record operating_point.json and the study README's table give the numbers). The only
difference from `reward_only` is the budgets' `task_point` setting ("memory"), so
`reward_only --set task_point=memory` runs the same thing.

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_belief_geometry.reward_only_memory.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.reward_only_memory.experiment

Writes what `reward_only` writes; probe_metrics.json's "task" block names the point.
"""

from __future__ import annotations

from experiments.mess3_belief_geometry import analysis
from experiments.mess3_belief_geometry.reward_only.experiment import HEADLINE, build_config
from experiments.mess3_belief_geometry.spec import (  # noqa: F401
    DEFAULT_BUDGET,
    MEMORY_UNTRAINED_INITS,
    MODEL_CONFIG,  # noqa lines: tests and tools read them here
    Budget,
    memory_budget,
    module_spec,
)
from rl_harness import Recipe, RunContext, run_algorithm
from rl_harness.analysis import run_stages

TASK_POINT = "memory"  # task.TASK_POINTS
UNTRAINED_INITS = MEMORY_UNTRAINED_INITS  # the incremental test's (c): spec.py
# The study's budgets, each at the memory point (RECIPE below; tools read them too).
SMOKE, CPU, FULL = memory_budget("smoke"), memory_budget("cpu"), memory_budget("full")
BUDGETS = {"smoke": SMOKE, "cpu": CPU, "full": FULL}


# What run() does after training, in order; `rl-harness analyze` runs the same on a
# finished run (analysis.stages).
STAGES = analysis.stages(
    label="reward_only_memory",
    module_spec=module_spec(),
    interventions=True,
    incremental_alone=True,
)
# run() runs the analysis and the result; the incremental tests alone are for finished runs
# (`rl-harness analyze ... --stage incremental_r2_sampled`).
ANALYSIS_STAGES = analysis.in_run(STAGES)


def run(context: RunContext[Budget]) -> dict:
    plan = context.settings  # the chosen budget, --set applied (the harness)
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
    stages=STAGES,
)

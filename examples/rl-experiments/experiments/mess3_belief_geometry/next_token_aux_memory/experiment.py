"""`next_token_aux` at the operating point where memory pays (issue 52, item 2).

What it shows: the same agent, auxiliary next-visible-token head, PPO and analysis as
`next_token_aux` (its experiment.py), on the task at `task.TASK_POINTS["memory"]` (see
`reward_only_memory` and operating_point.py). The only difference from `next_token_aux` is
the budgets' `task_point` setting ("memory").

Run (from the experiment repo):

    uv run rl-harness experiments.mess3_belief_geometry.next_token_aux_memory.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.next_token_aux_memory.experiment

Writes what `next_token_aux` writes; probe_metrics.json's "task" block names the point.
"""

from __future__ import annotations

from experiments.mess3_belief_geometry import analysis
from experiments.mess3_belief_geometry.next_token_aux.experiment import (  # noqa: F401
    AUX_TARGETS,  # noqa lines: tests and tools read them here
    AUX_WEIGHT,
    MODEL_CONFIG,
    build_config,
    module_spec,
)
from experiments.mess3_belief_geometry.spec import (
    DEFAULT_BUDGET,
    MEMORY_UNTRAINED_INITS,
    Budget,
    memory_budget,
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
    label="next_token_aux_memory",
    module_spec=module_spec(),
    aux_weight=AUX_WEIGHT,
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


RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, stages=STAGES)

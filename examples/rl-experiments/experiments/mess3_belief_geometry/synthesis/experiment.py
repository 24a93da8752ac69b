"""The study's comparison: every training leaf's runs, arms side by side, against the solvers.

What it shows: for each arm (reward_only, next_token_aux, belief_observation) over its runs
(training seeds): return per step under greedy and sampled actions and as a fraction of the
belief-MDP ceiling, and the decision-belief probe R² (global, within branches of equal last
2 visible tokens, and of equal tokens and binned actions) of the agent against its controls
on the agent's own held-out steps (an untrained module of the same architecture replayed on
the agent's observations, the raw observation, window baselines on the last k tokens and
actions), the paired agent-minus-control and agent-minus-best-window differences, the
within-branch permutation p-value, the per-k window and per-layer within-branch R²; mean
and 95% Student-t interval across runs
(rl_harness.analysis.comparison, the machinery of `rl-harness compare`). The solver values
(oracle, belief MDP, best stack-2, best memoryless) head the table.

Runs read: the completed runs under `<study>/<leaf>/results/` (or under
`$MESS3_BELIEF_GEOMETRY_RUNS/<leaf>/results/` when set), of one budget: `--budget cpu` (the
default), `--budget full`, `--smoke`; runs of other budgets are never pooled (study_table.md
names those left out). Runs from different library commits are refused
except in smoke mode (the error names them).

Run (from the experiment repo, after the training leaves):

    uv run rl-harness experiments.mess3_belief_geometry.synthesis.experiment --smoke
    uv run rl-harness experiments.mess3_belief_geometry.synthesis.experiment

Writes results/<run-id>/study_table.md (solver values and the comparison table),
comparison.md, comparison.json and comparison.png (one panel per metric, each run a dot).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.mess3_belief_geometry import shared
from rl_harness import RunContext
from rl_harness.analysis.comparison import compare_runs, comparison_markdown, write_comparison

TRAINING_LEAVES = ("reward_only", "next_token_aux", "belief_observation")
RUNS_ENV = "MESS3_BELIEF_GEOMETRY_RUNS"  # a study root holding <leaf>/results/<run-id>/
# result.json keys of each training run (see shared.summary).
METRICS = [
    "return_per_step/greedy",
    "return_per_step/sampled",
    "fraction_of_belief_mdp/greedy",
    "probe_r2",
    "probe_r2_within_branch",
    "probe_r2_within_action_branch",
    "untrained_r2",
    "untrained_r2_within_branch",
    "observation_r2",
    "observation_r2_within_branch",
    "agent_minus_untrained_within_branch",
    "agent_minus_best_window_within_branch",
    "agent_minus_best_window_within_action_branch",
    "best_window_k",
    "window_reaches_agent_within_branch_at_k",
    "within_branch_permutation_p_value",
]
# Per-k and per-layer keys (result.json "window_r2_within_branch" / "layer_r2_within_branch"):
# those every run has are added (the smoke budget fits fewer windows than the CPU one).
PER_RUN_GROUPS = ("window_r2_within_branch", "layer_r2_within_branch")


def metric_keys(folders: list[Path]) -> list[str]:
    """METRICS, then `<group>/<key>` for each per-k or per-layer key all runs report."""
    common: dict[str, list[str]] = {}
    for index, folder in enumerate(folders):
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        for group in PER_RUN_GROUPS:
            keys = list(result.get(group) or {})
            common[group] = keys if index == 0 else [k for k in common[group] if k in keys]
    return METRICS + [f"{group}/{key}" for group in PER_RUN_GROUPS for key in common.get(group, [])]


@dataclass(frozen=True)
class Pool:
    runs_budget: str  # the budget of the training runs this synthesis pools (never two)


# `--budget NAME` pools the training runs of that budget only (`--smoke`: the smoke runs).
BUDGETS = {"smoke": Pool("smoke"), "cpu": Pool("cpu"), "full": Pool("full")}
DEFAULT_BUDGET = "cpu"


def run_budget(manifest: Mapping[str, Any]) -> str:
    """A training run's budget: its recorded name (`options.budget`; smoke for --smoke).
    Runs recorded before budgets had names chose FULL on a GPU hardware plan, else CPU."""
    options = manifest.get("options") or {}
    if options.get("smoke"):
        return "smoke"
    if options.get("budget"):
        return str(options["budget"])
    plan = (manifest.get("hardware") or {}).get("plan") or {}
    return "full" if (plan.get("num_gpus_per_learner") or 0) > 0 else "cpu"


def study_root(context: RunContext) -> Path:
    return Path(os.environ.get(RUNS_ENV) or context.experiment_dir.parent)


def run_folders(root: Path, budget: str) -> tuple[list[Path], dict[str, list[str]]]:
    """(completed runs of the training leaves under `root` of `budget`, {other budget: run
    ids left out})."""
    folders: list[Path] = []
    others: dict[str, list[str]] = {}
    for leaf in TRAINING_LEAVES:
        for manifest in sorted((root / leaf / "results").glob("*/run_manifest.json")):
            record = json.loads(manifest.read_text(encoding="utf-8"))
            if record.get("status") != "completed":
                continue
            if run_budget(record) == budget:
                folders.append(manifest.parent)
            else:
                others.setdefault(run_budget(record), []).append(manifest.parent.name)
    return folders, others


def solver_table(values: dict) -> str:
    lines = ["| reference (solver) | return per step |", "|---|---|"]
    for key, label in shared.REFERENCES.items():
        value = values.get(key)
        lines.append(f"| {label} | {'pending' if value is None else f'{value:.4f}'} |")
    return "\n".join(lines) + f"\n\nSolver values from {values.get('source')}.\n"


def run(context: RunContext) -> dict:
    root = study_root(context)
    budget = context.settings.runs_budget
    folders, other_budgets = run_folders(root, budget)
    if not folders:
        raise RuntimeError(
            f"no completed {budget} runs of {', '.join(TRAINING_LEAVES)} under {root}; "
            "run the training leaves first (other budgets: "
            f"{', '.join(other_budgets) or 'none'})"
        )
    # One budget, read by run_budget (which also reads records from before budgets had
    # names): compare_runs, which sees only recorded names, need not refuse them again.
    comparison = compare_runs(
        folders, metric_keys(folders), allow_mixed=context.smoke, allow_mixed_budgets=True
    )
    left = "; ".join(f"{name}: {', '.join(ids)}" for name, ids in other_budgets.items())
    values = shared.solver_values()
    files = write_comparison(comparison, context.results_dir)
    table = context.results_dir / "study_table.md"
    table.write_text(
        "# MESS3 occupancy control: arms against the solver ceilings\n\n"
        + solver_table(values)
        + f"\nBudget: {budget} runs only"
        + (f" (left out: {left})" if left else "")
        + ".\n\n"
        + comparison_markdown(comparison),
        encoding="utf-8",
    )
    return {
        "runs": len(comparison.runs),
        "arms": {arm.arm: arm.n_runs for arm in comparison.arms},
        "budget": budget,
        "left_out_other_budgets": other_budgets,
        "solver_values": {key: values.get(key) for key in shared.REFERENCES},
        "greedy_return_per_step": {
            arm.arm: arm.metrics["return_per_step/greedy"].mean for arm in comparison.arms
        },
        "files": [path.name for path in [table, *files]],
    }

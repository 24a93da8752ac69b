"""Backfill the causal belief interventions for runs that finished without them.

    uv run python -m experiments.mess3_belief_geometry.interventions RESULTS_RUN_DIR [...]

For each results/<run-id> folder of a `reward_only` or `next_token_aux` run (one made by an
older commit included): read its manifest (leaf, seed, smoke), load its final checkpoint
(`RunArtifacts.final_checkpoint`: the summary's, else the newest), roll out the agent greedily
with the analysis' own settings (`shared.rollout_settings`: the same seeds, warm-up and
batching, so these are the first episodes and steps of the run's own analysis rollouts),
build the untrained control as the analysis does, and run `shared.run_interventions` at the
current leaf's Budget sizes (the run's recorded budget with its --set overrides; a run from
before budgets had names: SMOKE for a smoke run, else CPU; CPU and FULL sizes are equal,
tested). Writes interventions.json and interventions.png into that run's results folder
(an existing interventions.json is kept unless --overwrite). A run that is not `completed`
is refused unless --any-status (its newest checkpoint is then used).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from experiments.mess3_belief_geometry import shared
from rl_harness.analysis import RunArtifacts, collect_rollouts, load_module
from rl_harness.seeding import stream_seed

STUDY = "experiments.mess3_belief_geometry"
LEAVES = ("reward_only", "next_token_aux")  # the leaves that run interventions


def leaf_of(run: RunArtifacts) -> str:
    """The study leaf that made `run` (from its manifest's experiment module)."""
    module = ((run.manifest or {}).get("experiment") or {}).get("module") or ""
    for leaf in LEAVES:
        if module == f"{STUDY}.{leaf}.experiment":
            return leaf
    raise ValueError(
        f"run {run.run_id} was made by {module or 'an unknown module'!r}, not one of "
        f"{', '.join(f'{STUDY}.{leaf}.experiment' for leaf in LEAVES)}"
    )


def backfill(
    results_dir: Path,
    *,
    overwrite: bool = False,
    any_status: bool = False,
    optimal_policy: Any = None,
) -> dict[str, Any] | None:
    """Write interventions.json and interventions.png for one finished run; return the
    headline (None when the run already had interventions.json and `overwrite` is off)."""
    run = RunArtifacts.open(results_dir)
    leaf = leaf_of(run)
    if run.status != "completed" and not any_status:
        raise ValueError(
            f"run {run.run_id} is {run.status or 'unrecorded'}, not completed "
            "(pass --any-status to use its newest checkpoint)"
        )
    target = run.results_dir / shared.INTERVENTIONS_FILE
    if target.exists() and not overwrite:
        print(f"{run.run_id}: {target.name} exists (pass --overwrite to redo it)")
        return None
    recipe = importlib.import_module(f"{STUDY}.{leaf}.experiment")
    smoke = run.budget == "smoke"
    # The run's recorded budget and --set overrides (runs from before budgets had names: CPU).
    overrides = ((run.manifest or {}).get("budget") or {}).get("overrides") or {}
    plan = dataclasses.replace(recipe.BUDGETS[run.budget or "cpu"], **overrides)
    seed = run.seed if run.seed is not None else 42
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[interventions {run.run_id} {time.perf_counter() - started:6.1f}s] {message}")

    checkpoint = run.final_checkpoint()
    say(f"{leaf} seed {seed}{' (smoke)' if smoke else ''}: checkpoint {checkpoint}")
    module = load_module(checkpoint)
    make_env = shared.probe_env_factory(decision_belief_in_observation=False)
    probe_env = make_env(1)
    action_space = probe_env.single_action_space
    probe_env.close()
    say(
        f"greedy rollouts: {plan.intervention_episodes} episodes x ({plan.warmup_steps} + "
        f"{plan.intervention_steps}) steps"
    )
    greedy = collect_rollouts(
        module,
        n_episodes=plan.intervention_episodes,
        episode_steps=plan.intervention_steps,
        policy="greedy",
        **shared.rollout_settings(plan, seed, make_env, action_space),
    )
    control = shared.untrained_module(
        recipe.module_spec(), make_env, stream_seed(seed, "study", "untrained")
    )
    return shared.run_interventions(
        run.results_dir,
        label=leaf,
        module=module,
        control=control,
        rollouts=greedy,
        plan=plan,
        seed=seed,
        checkpoint=checkpoint,
        say=say,
        optimal_policy=optimal_policy,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.mess3_belief_geometry.interventions",
        description="Causal belief interventions for finished reward_only / next_token_aux "
        "runs: writes interventions.json and interventions.png into each results folder.",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results/<run-id> folders")
    parser.add_argument("--overwrite", action="store_true", help="redo an existing one")
    parser.add_argument(
        "--any-status", action="store_true", help="also runs not completed (newest checkpoint)"
    )
    args = parser.parse_args(argv)
    before = torch.get_num_threads()
    torch.set_num_threads(shared.ANALYSIS_TORCH_THREADS)
    failed = 0
    try:
        for path in args.runs:
            try:
                headline = backfill(path, overwrite=args.overwrite, any_status=args.any_status)
            except (FileNotFoundError, KeyError, ValueError) as error:
                print(f"interventions: error: {path}: {error}", file=sys.stderr)
                failed += 1
                continue
            if headline is not None:
                print(f"{path}: {headline}")
    finally:
        torch.set_num_threads(before)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory beyond a window (issue 52, item 1): the library's incremental R² on the agent's data,
in-run and for finished runs.

    uv run python -m experiments.mess3_belief_geometry.incremental RESULTS_RUN_DIR \
        [--checkpoint CHECKPOINT] [--policy greedy|sample] [--overwrite] [--any-status]

On the agent's own greedy rollouts (the analysis' rollout settings, `probing.rollout_settings`)
and the agent probe's split and resamples: for k = 1..window_k_max (6 at the CPU budget),
`rl_harness.analysis.incremental_r2` with (a) the windows' MLP on the last k steps of what the
agent read (the observation's visible-token and previous-executed-action parts, warm-up steps
as history: never the belief, even where the observation shows it), (b) the same plus the
agent's representation's read-out, (c) the same plus the untrained module's (same
architecture, the analysis' seeded weights, replayed on the agent's observations). Scored
globally and within the study's branchings (tokens_2, tokens_actions_2). The agent's actions
carry its memory into its own later inputs; the window reads those actions, so what the
agent shows through its actions is credited to the window, not to its representation.

probe_metrics.json key `incremental_r2` (INCREMENTAL_SCHEMA_VERSION): {schema_version, data,
inputs, checkpoint, n_episodes, episode_steps, branchings, table (IncrementalR2.to_dict():
ks, rows [{k, window, agent, control, agent_increment, control_increment,
agent_minus_control, p_values, ...}], p_values_holm, model, regressor, ...)}; result.json key
`incremental_r2`: the headline (`headline`). The backfill writes both into a finished run's
files, from its final checkpoint or the one `--checkpoint` names (an existing record is kept
unless --overwrite).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import controls, probing, task
from rl_harness import write_json
from rl_harness.analysis import (
    ProbeEvaluation,
    Rollouts,
    RunArtifacts,
    collect_rollouts,
    evaluate_probe,
    incremental_r2,
    load_module,
    replay_rollouts,
)
from rl_harness.seeding import stream_seed

INCREMENTAL_SCHEMA_VERSION = 1
KEY = "incremental_r2"  # in probe_metrics.json and result.json: on the greedy rollouts
# The same test on the agent's sampled rollouts: the policy it trained and is scored with.
# Where the greedy policy earns far less than the sampled one (the memory point: 0.11 against
# 0.62 per step), the greedy rollouts visit states the trained policy rarely reaches; which
# data the reading rests on is a choice that can change it, so both are recorded.
KEY_SAMPLED = "incremental_r2_sampled"
DATA = (
    "the trained agent's greedy rollouts (its own actions), the analysis' episodes; the "
    "untrained module replays the same observations"
)
DATA_SAMPLED = (
    "the trained agent's sampled rollouts (its own sampled actions, the analysis' episodes and "
    "seeds); the untrained module replays the same observations"
)
KEYS = {"greedy": KEY, "sample": KEY_SAMPLED}
INPUTS = (
    "per step, the observation's visible-token and previous-executed-action parts: exactly "
    "what the agent read (never the belief), warm-up steps as history"
)


def agent_probe(rollouts: Rollouts, layout: Any, plan: Any, seed: int) -> ProbeEvaluation:
    """The analysis' agent probe on `rollouts` (its split and resamples pair every score)."""
    return evaluate_probe(
        rollouts.representations,
        rollouts.targets,
        controls.probe_settings(plan, seed),
        target_names=probing.BELIEF_NAMES,
        branch_tokens=rollouts.observations[..., layout.tokens],
    )


def measure(
    rollouts: Rollouts,
    untrained_features: np.ndarray,
    *,
    agent: ProbeEvaluation,
    branchings: Mapping[str, np.ndarray],
    layout: Any,
    plan: Any,
    say: Any = print,
    data: str = DATA,
) -> dict[str, Any]:
    """The `incremental_r2` record on the agent's `rollouts` (greedy unless `data` says
    otherwise; its probe `agent`, the branchings {name: (E, T) labels}) with the untrained
    module's replayed features."""
    parts = np.r_[layout.tokens, layout.actions]  # what the agent read, never the belief
    ks = list(range(1, plan.window_k_max + 1))
    say(f"incremental R²: windows k = 1..{ks[-1]} alone, with the agent's, with the untrained's")
    table = incremental_r2(
        agent,
        rollouts.observations[..., parts],
        rollouts.targets,
        representation=rollouts.representations,
        control=untrained_features,
        ks=ks,
        history=rollouts.warmup_observations[..., parts],
        branchings=branchings,
        progress=say,
    )
    return {
        "schema_version": INCREMENTAL_SCHEMA_VERSION,
        "data": data,
        "inputs": INPUTS,
        "n_episodes": rollouts.n_episodes,
        "episode_steps": rollouts.episode_steps,
        "branchings": sorted(branchings),
        "table": table.to_dict(),
    }


def measure_sampled(
    sampled: Rollouts,
    untrained_features: np.ndarray,
    *,
    layout: Any,
    plan: Any,
    seed: int,
    say: Any = print,
) -> dict[str, Any]:
    """The incremental test on the agent's sampled rollouts (`KEY_SAMPLED`): its own probe of
    the agent's representation on them (the analysis' probe settings and seed, so its split
    and resamples are those of the greedy probe's episode indices) and its own action
    branching; `untrained_features` is the untrained module replayed on `sampled`."""
    agent = agent_probe(sampled, layout, plan, seed)
    branching = controls.action_branching(
        sampled.observations[..., layout.tokens],
        sampled.observations[..., layout.actions],
        agent.train_episodes,
        agent.test_episodes,
    )
    return measure(
        sampled,
        untrained_features,
        agent=agent,
        branchings=branching.labels,
        layout=layout,
        plan=plan,
        say=say,
        data=DATA_SAMPLED,
    )


def headline(record: Mapping[str, Any]) -> dict[str, Any]:
    """result.json's `incremental_r2`: per k (`k<k>`), global and within tokens_2, the value of
    R²(a), R²(b), R²(c), b - a and b - c, with b - a's and b - c's intervals and Holm p."""
    table = record["table"]
    holm = table["p_values_holm"]
    out: dict[str, Any] = {}
    for index, row in enumerate(table["rows"]):
        block: dict[str, Any] = {}
        scores = {
            "global": ("r2_pooled",),
            probing.TOKEN_BRANCHES: ("within_branch", probing.TOKEN_BRANCHES),
        }
        for score, path in scores.items():
            suffix = "" if score == "global" else "_within_branch"
            for name in ("window", "agent", "control"):
                block[f"r2_{name}{suffix}"] = probing.value(row[name], *path)
            for name in ("agent_increment", "agent_minus_control"):
                estimate = row[name]
                for key in path:
                    estimate = (estimate or {}).get(key)
                block[f"{name}{suffix}"] = estimate
                block[f"{name}{suffix}_p_holm"] = holm[name][score][index]
        out[f"k{row['k']}"] = block
    return out


# ---------------------------------------------------------------------------- backfill


def backfill(
    results_dir: Path,
    *,
    overwrite: bool = False,
    any_status: bool = False,
    checkpoint: Path | None = None,
    policy: str = "greedy",
) -> dict[str, Any] | None:
    """Add `incremental_r2` (policy "greedy") or `incremental_r2_sampled` (policy "sample") to
    a finished run's probe_metrics.json and result.json, from its final checkpoint or
    `checkpoint` (e.g. one reproduced from the run's record); return the headline (None when
    the run already has it and `overwrite` is off)."""
    if policy not in KEYS:
        raise ValueError(f"policy must be one of {', '.join(KEYS)}, not {policy!r}")
    key = KEYS[policy]
    run = RunArtifacts.open(results_dir)
    leaf = controls.leaf_of(run)
    if run.status != "completed" and not any_status:
        raise ValueError(
            f"run {run.run_id} is {run.status or 'unrecorded'}, not completed "
            "(pass --any-status to use its newest checkpoint)"
        )
    metrics_path = run.results_dir / "probe_metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if key in metrics and not overwrite:
        print(f"{run.run_id}: probe_metrics.json has {key} (pass --overwrite to redo it)")
        return None
    recipe = importlib.import_module(f"{controls.STUDY}.{leaf}.experiment")
    plan = controls.run_plan(recipe, (run.manifest or {}).get("options") or {})
    seed = run.seed if run.seed is not None else 42
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[incremental {run.run_id} {time.perf_counter() - started:6.1f}s] {message}")

    if checkpoint is None:
        checkpoint = run.final_checkpoint()
    elif not Path(checkpoint).exists():
        raise FileNotFoundError(f"no checkpoint at {checkpoint}")
    say(f"{leaf} seed {seed}: checkpoint {checkpoint}")
    module = load_module(checkpoint)
    # The run's own operating point (its budget's task_point): the memory leaves' env differs.
    make_env = probing.probe_env_factory(controls.LEAVES[leaf], task.point_of(plan))
    env = make_env(1)
    layout, action_space = env.layout, env.single_action_space
    env.close()
    settings = probing.rollout_settings(plan, seed, make_env, action_space)
    say(f"{policy} rollouts ({plan.probe_episodes} episodes), the untrained module replaying them")
    if policy == "greedy":
        rollouts = controls.data_set("agent_greedy", module, settings, plan)
    else:  # as analysis.py collects the sampled rollouts
        rollouts = collect_rollouts(
            module,
            n_episodes=plan.probe_episodes,
            episode_steps=plan.probe_steps,
            policy="sample",
            **settings,
        )
    control = probing.untrained_module(
        recipe.module_spec(), make_env, stream_seed(seed, "study", "untrained")
    )
    untrained = replay_rollouts(control, rollouts, steps_per_call=probing.REPLAY_STEPS)
    if policy == "greedy":
        agent = agent_probe(rollouts, layout, plan, seed)
        branching = controls.action_branching(
            rollouts.observations[..., layout.tokens],
            rollouts.observations[..., layout.actions],
            agent.train_episodes,
            agent.test_episodes,
        )
        record = measure(
            rollouts,
            untrained,
            agent=agent,
            branchings=branching.labels,
            layout=layout,
            plan=plan,
            say=say,
        )
    else:
        record = measure_sampled(rollouts, untrained, layout=layout, plan=plan, seed=seed, say=say)
    record["checkpoint"] = str(checkpoint)
    record["wall_time_s"] = round(time.perf_counter() - started, 3)
    write_json(metrics_path, metrics | {key: record})
    top = headline(record)
    result_path = run.results_dir / "result.json"
    if result_path.exists():
        write_json(result_path, json.loads(result_path.read_text()) | {key: top})
    say(f"wrote {key} into probe_metrics.json and result.json")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    return probing.backfill_main(
        argv,
        name="incremental",
        description="Incremental R² over a window (k = 1..K; the agent's and the untrained "
        f"module's read-outs beside the window) for finished runs: adds {KEY} (greedy "
        f"rollouts) or, with --policy sample, {KEY_SAMPLED} to each run's probe_metrics.json "
        "and result.json.",
        backfill=backfill,
        show=json.dumps,
        checkpoint=True,
        policy=True,
    )


if __name__ == "__main__":
    sys.exit(main())

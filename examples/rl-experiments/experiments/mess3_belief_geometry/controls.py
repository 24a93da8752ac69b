"""Controls the trained agent cannot contaminate (issue 37, item 4), in-run and for finished runs.

    uv run python -m experiments.mess3_belief_geometry.controls RESULTS_RUN_DIR [...]

Why: on the agent's own greedy rollouts the window baselines and the untrained module read
the agent's previous executed actions, and those actions carry the agent's memory (the
newest token plus the previous action already reaches most of the agent's within-branch R²).
A control fed the agent's choices is not a memoryless control. So every control is also
scored on data whose actions the trained agent did not choose, and on windows without
actions:

- three data sets, each with its own exact decision beliefs (env info, filtered through the
  actions actually executed) and the same episode reset seeds (`probing.rollout_settings`):
  `agent_greedy` (the agent's greedy rollouts, as in probe_metrics.json's other blocks),
  `belief_mdp` (actions from the belief-MDP policy, `rl_harness.envs.mess3.solvers`
  belief_vi at the study's parameters, of info['decision_belief']), `random` (actions
  uniform in [-W_MAX, W_MAX]^2 from the named stream (analysis, rollouts, random_actions) of
  the run's seed). On the driven sets the trained agent and the untrained module only read
  (their own actions are discarded);
- on each set, scored on that set's held-out episodes and bootstrap resamples (the agent
  probe's split there): the agent's probe (the reference), the untrained module (same
  architecture, the analysis' seeded weights, replayed on that set's observations), the raw
  observation, window MLPs on the last k tokens and executed actions, and window MLPs on the
  last k tokens only (`tokens_only_windows`: never read an action); paired differences
  agent minus each;
- branchings: `tokens_2` (equal last 2 visible tokens) and `tokens_actions_2` (also equal
  binned last 2 previous actions). The bins (the library's `action_branching`): each action
  coordinate in ACTION_BINS equal-frequency bins by mid-rank among the *fit* (probe-train)
  episodes' values, so a point mass at the clip bound is a bin of its own (a cut at quantile
  edges puts every value in one bin when two edges fall on the bound; the study README says
  which runs had it). The record states how many branches the actions added and how many
  held-out steps sit in branches with at least 2 steps (what within-branch R² can use).

The scoring is the library's: `rl_harness.analysis.controls.score_controls` (one call from one
collection of rollouts; `controls_on` adds the data set's sentence); this module chooses the
data sets, the probe settings and the sizes.

probe_metrics.json key `controls_by_data` (CONTROLS_SCHEMA_VERSION): {schema_version, data
(the three sentences), <data set>: {data, n_episodes, episode_steps, return_per_step,
action_branching, agent_probe (ProbeReport), scores {agent, untrained_module, observation},
windows (tokens and actions: WindowTable.to_dict), tokens_only_windows (WindowTable.to_dict),
best_window_k, best_tokens_window_k, differences {agent_minus_untrained_module,
agent_minus_observation, agent_minus_best_window, agent_minus_best_tokens_window}}};
result.json key `controls_by_data`: the headline (`headline`). The backfill command writes both
into a finished run's files (an existing `controls_by_data` is kept unless --overwrite).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import probing, task
from experiments.mess3_belief_geometry.spec import Budget
from rl_harness import write_json
from rl_harness.analysis import (
    ProbeEvaluation,
    ProbeSettings,
    Rollouts,
    RunArtifacts,
    collect_rollouts,
    load_module,
    replay_rollouts,
)
from rl_harness.analysis.controls import ActionBranching, ControlScores, score_controls
from rl_harness.analysis.controls import action_branching as library_action_branching
from rl_harness.seeding import stream_seed

CONTROLS_SCHEMA_VERSION = 1
KEY = "controls_by_data"  # in probe_metrics.json and result.json
DATA_SETS = ("agent_greedy", "belief_mdp", "random")
ACTION_BINS = probing.ACTION_BINS  # equal-frequency bins per action coordinate
STUDY = "experiments.mess3_belief_geometry"
LEAVES = {  # leaf -> decision_belief_in_observation
    "reward_only": False,
    "next_token_aux": False,
    "belief_observation": True,
    "reward_only_memory": False,  # at task.TASK_POINTS["memory"] (their budgets' task_point)
    "next_token_aux_memory": False,
}
DATA = {
    "agent_greedy": "the trained agent's greedy rollouts (its own actions)",
    "belief_mdp": "rollouts whose actions are the belief-MDP policy's (belief_vi, delay "
    f"{task.DELAY}) at info['decision_belief']; the agent and the untrained module only read",
    "random": f"rollouts whose actions are uniform in [-{task.W_MAX:g}, {task.W_MAX:g}]^2 "
    "from the stream (analysis, rollouts, random_actions) of the run's seed; the agent and "
    "the untrained module only read",
}

Actor = Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]


def action_branching(
    tokens: np.ndarray,
    actions: np.ndarray,
    fit_episodes: np.ndarray,
    test_episodes: np.ndarray,
) -> ActionBranching:
    """The study's two branchings (the library's `action_branching` at BRANCH_K, ACTION_BINS):
    equal last 2 visible tokens, and those plus the last 2 binned previous actions."""
    return library_action_branching(
        tokens, actions, fit_episodes, test_episodes, k=probing.BRANCH_K, n_bins=ACTION_BINS
    )


def score_on(
    rollouts: Rollouts,
    untrained_features: np.ndarray,
    *,
    layout: Any,
    plan: Budget,
    seed: int,
    data: str,
    say: Any = print,
    agent: ProbeEvaluation | None = None,
) -> ControlScores:
    """Every control on one data set (the library's `score_controls` with the study's probe
    settings), scored on its own held-out episodes and resamples (the agent probe's split
    there). `agent`: the agent's probe already evaluated on `rollouts` under these settings
    (the in-run analysis' own, with its permutation nulls): read, not fitted again."""
    return score_controls(
        rollouts,
        untrained_features,
        settings=probe_settings(plan, seed),
        tokens=layout.tokens,
        actions=layout.actions,
        ks=list(range(1, plan.window_k_max + 1)),
        target_names=probing.BELIEF_NAMES,
        n_bins=ACTION_BINS,
        agent=agent,
        progress=lambda message: say(f"{data}: {message}"),
    )


def probe_settings(plan: Budget, seed: int) -> ProbeSettings:
    """The study's probe protocol at `plan`'s sizes (no permutation nulls)."""
    return ProbeSettings(
        seed=seed,
        ridge=probing.PROBE_RIDGE,
        test_fraction=probing.PROBE_TEST_FRACTION,
        n_bootstrap=plan.n_bootstrap,
        branch_depth=probing.BRANCH_K,
    )


def block(scored: ControlScores, data: str) -> dict[str, Any]:
    """The `controls_by_data` block of one data set: its sentence and `scored`'s record."""
    return {"data": DATA.get(data, data)} | scored.to_dict()


def controls_on(
    rollouts: Rollouts,
    untrained_features: np.ndarray,
    *,
    layout: Any,
    plan: Budget,
    seed: int,
    data: str,
    say: Any = print,
) -> dict[str, Any]:
    """The `controls_by_data` block of one data set (`score_on`, plus the set's sentence)."""
    scored = score_on(
        rollouts, untrained_features, layout=layout, plan=plan, seed=seed, data=data, say=say
    )
    return block(scored, data)


def actor_rollouts(
    module: Any, actor: Actor | None, settings: Mapping[str, Any], plan: Budget
) -> Rollouts:
    """The analysis' rollouts (sizes of `plan`, `settings` from `probing.rollout_settings`):
    the module's greedy play when `actor` is None, else `actor`'s (the module only reads)."""
    return collect_rollouts(
        module,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        policy="greedy",
        actor=actor,
        **settings,
    )


def belief_actor(policy: Callable[[np.ndarray], np.ndarray]) -> Actor:
    """Actions of a belief policy at the env's exact decision belief (info)."""

    def act(obs: np.ndarray, info: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(policy(np.asarray(info["decision_belief"], dtype=np.float64)))

    return act


def data_set(
    name: str,
    module: Any,
    settings: Mapping[str, Any],
    plan: Budget,
    belief_policy: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Rollouts:
    """The rollouts of DATA_SETS[name] (the belief-MDP policy defaults to the cached solve)."""
    if name == "agent_greedy":
        return actor_rollouts(module, None, settings, plan)
    if name == "belief_mdp":
        policy = belief_policy
        if policy is None:
            policy = task.belief_mdp_policy(point=task.point_of(plan))
        return actor_rollouts(module, belief_actor(policy), settings, plan)
    if name == "random":
        return collect_rollouts(
            module,
            n_episodes=plan.probe_episodes,
            episode_steps=plan.probe_steps,
            policy="random",
            **settings,
        )
    raise ValueError(f"unknown data set {name!r}; one of {', '.join(DATA_SETS)}")


def controls_by_data(
    module: Any,
    control: Any,
    *,
    make_env: Any,
    plan: Budget,
    seed: int,
    greedy: Rollouts | None = None,
    belief_policy: Callable[[np.ndarray], np.ndarray] | None = None,
    say: Any = print,
    rollouts: Mapping[str, Rollouts] | None = None,
    untrained: Mapping[str, np.ndarray] | None = None,
    blocks: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The `controls_by_data` record: `controls_on` each of DATA_SETS. What the caller already
    has, collected and scored with the same settings and sizes, is read instead of redone:
    `greedy` or `rollouts` {data set: Rollouts}, `untrained` {data set: the control's
    replayed features}, `blocks` {data set: its block, e.g. the in-run analysis' agent data
    scored once (`block(score_on(...))`)}."""
    env = make_env(1)
    layout, action_space = env.layout, env.single_action_space
    env.close()
    settings = probing.rollout_settings(plan, seed, make_env, action_space)
    known = dict(rollouts or {})
    if greedy is not None:
        known.setdefault("agent_greedy", greedy)
    record: dict[str, Any] = {"schema_version": CONTROLS_SCHEMA_VERSION, "data": dict(DATA)}
    for name in DATA_SETS:
        if name in (blocks or {}):
            record[name] = dict((blocks or {})[name])
            continue
        data = known.get(name)
        if data is None:
            say(f"{name}: rollouts ({plan.probe_episodes} episodes), the agent reading")
            data = data_set(name, module, settings, plan, belief_policy)
        features = (untrained or {}).get(name)
        if features is None:
            say(f"{name}: replaying the untrained module")
            features = replay_rollouts(control, data, steps_per_call=probing.REPLAY_STEPS)
        say(f"{name}: probes")
        record[name] = controls_on(
            data, features, layout=layout, plan=plan, seed=seed, data=name, say=say
        )
    return record


def headline(record: Mapping[str, Any]) -> dict[str, Any]:
    """result.json's `controls_by_data`: per data set, within-branch R² (tokens_2 unless
    named) of the agent and each control, and the paired differences."""
    out: dict[str, Any] = {}
    for name in DATA_SETS:
        block = record.get(name)
        if block is None:
            continue
        scores, differences = block["scores"], block["differences"]
        within = ("within_branch", probing.TOKEN_BRANCHES)
        out[name] = {
            "return_per_step": block["return_per_step"],
            "agent_r2_within_branch": probing.value(scores["agent"], *within),
            "agent_r2_within_action_branch": probing.value(
                scores["agent"], "within_branch", probing.ACTION_BRANCHES
            ),
            "untrained_r2_within_branch": probing.value(scores["untrained_module"], *within),
            "observation_r2_within_branch": probing.value(scores["observation"], *within),
            "window_r2_within_branch": {
                f"k{row['k']}": probing.value(row["window"], *within)
                for row in block["windows"]["windows"]
            },
            "tokens_window_r2_within_branch": {
                f"k{row['k']}": probing.value(row["window"], *within)
                for row in block["tokens_only_windows"]["windows"]
            },
            "agent_minus_untrained_within_branch": probing.value(
                differences["agent_minus_untrained_module"], *within
            ),
            "agent_minus_best_window_within_branch": probing.value(
                differences["agent_minus_best_window"], *within
            ),
            "agent_minus_best_tokens_window_within_branch": probing.value(
                differences["agent_minus_best_tokens_window"], *within
            ),
            "action_branches_added": block["action_branching"]["branches_added_by_actions"],
        }
    return out


# ---------------------------------------------------------------------------- backfill


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


def run_plan(recipe: Any, options: Mapping[str, Any]) -> Any:
    """The Budget a run's analysis used: its recorded budget name where the recipe has
    BUDGETS, else SMOKE for a smoke run and CPU otherwise."""
    name = options.get("budget") or ("smoke" if options.get("smoke") else "cpu")
    budgets = getattr(recipe, "BUDGETS", None)
    if isinstance(budgets, Mapping) and name in budgets:
        return budgets[name]
    return recipe.SMOKE if name == "smoke" else recipe.CPU


def backfill(
    results_dir: Path,
    *,
    overwrite: bool = False,
    any_status: bool = False,
    belief_policy: Callable[[np.ndarray], np.ndarray] | None = None,
    checkpoint: Path | None = None,
) -> dict[str, Any] | None:
    """Add `controls_by_data` to a finished run's probe_metrics.json and result.json, from its
    final checkpoint or `checkpoint`; return the headline (None when the run already has it
    and `overwrite` is off)."""
    run = RunArtifacts.open(results_dir)
    leaf = leaf_of(run)
    if run.status != "completed" and not any_status:
        raise ValueError(
            f"run {run.run_id} is {run.status or 'unrecorded'}, not completed "
            "(pass --any-status to use its newest checkpoint)"
        )
    metrics_path = run.results_dir / "probe_metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if KEY in metrics and not overwrite:
        print(f"{run.run_id}: probe_metrics.json has {KEY} (pass --overwrite to redo it)")
        return None
    recipe = importlib.import_module(f"{STUDY}.{leaf}.experiment")
    plan = run_plan(recipe, (run.manifest or {}).get("options") or {})
    seed = run.seed if run.seed is not None else 42
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[controls {run.run_id} {time.perf_counter() - started:6.1f}s] {message}")

    if checkpoint is None:
        checkpoint = run.final_checkpoint()
    elif not Path(checkpoint).exists():
        raise FileNotFoundError(f"no checkpoint at {checkpoint}")
    say(f"{leaf} seed {seed}: checkpoint {checkpoint}")
    module = load_module(checkpoint)
    make_env = probing.probe_env_factory(LEAVES[leaf], task.point_of(plan))
    control = probing.untrained_module(
        recipe.module_spec(), make_env, stream_seed(seed, "study", "untrained")
    )
    record = controls_by_data(
        module,
        control,
        make_env=make_env,
        plan=plan,
        seed=seed,
        belief_policy=belief_policy,
        say=say,
    )
    record["checkpoint"] = str(checkpoint)
    record["wall_time_s"] = round(time.perf_counter() - started, 3)
    write_json(metrics_path, metrics | {KEY: record})
    top = headline(record)
    result_path = run.results_dir / "result.json"
    if result_path.exists():
        write_json(result_path, json.loads(result_path.read_text()) | {KEY: top})
    say(f"wrote {KEY} into probe_metrics.json and result.json")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    return probing.backfill_main(
        argv,
        name="controls",
        description="Controls on data the trained agent did not choose (belief-MDP and random "
        "actions) and tokens-only windows, for finished runs of the study: adds "
        f"{KEY} to each run's probe_metrics.json and result.json.",
        backfill=backfill,
        show=json.dumps,
        checkpoint=True,
    )


if __name__ == "__main__":
    sys.exit(main())

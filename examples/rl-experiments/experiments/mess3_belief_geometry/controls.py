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
  binned last 2 previous actions). The bins (`action_branching`): each action coordinate in
  ACTION_BINS equal-frequency bins by mid-rank among the *fit* (probe-train) episodes' values,
  so a point mass at the clip bound is a bin of its own (a cut at quantile edges puts every
  value in one bin when two edges fall on the bound; the study README says which runs had
  it). The record states how many branches the actions added and how many held-out steps
  sit in branches with at least MIN_BRANCH_MEMBERS steps (what within-branch R² can use).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import probing, task
from experiments.mess3_belief_geometry.spec import Budget
from rl_harness import write_json
from rl_harness.analysis import (
    Rollouts,
    RunArtifacts,
    branch_ids,
    collect_rollouts,
    compare_with_windows,
    evaluate_probe,
    held_out_scores,
    load_module,
    paired_difference,
    quantile_bins,
    replay_rollouts,
)
from rl_harness.analysis.windows import DEFAULT_STREAM as WINDOW_STREAM
from rl_harness.seeding import stream_seed

CONTROLS_SCHEMA_VERSION = 1
KEY = "controls_by_data"  # in probe_metrics.json and result.json
DATA_SETS = ("agent_greedy", "belief_mdp", "random")
ACTION_BINS = probing.ACTION_BINS  # equal-frequency bins per action coordinate
MIN_BRANCH_MEMBERS = 2  # a branch needs 2 steps to carry within-branch variance
TOKENS_ONLY_STREAM = (*WINDOW_STREAM, "tokens_only")  # its MLPs' init and batch streams
STUDY = "experiments.mess3_belief_geometry"
LEAVES = {  # leaf -> decision_belief_in_observation
    "reward_only": False,
    "next_token_aux": False,
    "belief_observation": True,
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


@dataclass(frozen=True)
class ActionBranching:
    """The two branchings of one data set and what the actions added."""

    labels: dict[str, np.ndarray]  # {tokens_2, tokens_actions_2}: (E, T) branch labels
    record: dict[str, Any]


def token_codes(tokens: np.ndarray) -> np.ndarray:
    """(E, T, 1) the visible token 0..2, or 3 where none is visible yet (all-zero one-hot)."""
    return tokens.argmax(-1)[..., None] + 3 * (tokens.max(-1, keepdims=True) == 0)


def _held_out_counts(labels: np.ndarray) -> dict[str, int]:
    _, counts = np.unique(labels, return_counts=True)
    enough = counts >= MIN_BRANCH_MEMBERS
    return {
        "n_branches": int(counts.size),
        "branches_with_min_members": int(enough.sum()),
        "steps_in_branches_with_min_members": int(counts[enough].sum()),
    }


def action_branching(
    tokens: np.ndarray,
    actions: np.ndarray,
    fit_episodes: np.ndarray,
    test_episodes: np.ndarray,
    *,
    k: int = probing.BRANCH_K,
    n_bins: int = ACTION_BINS,
) -> ActionBranching:
    """Branches of equal last k visible tokens, and of those plus the last k binned previous
    actions (bins from the `fit_episodes` only), with the counts that say whether the
    actions split anything."""
    bins = quantile_bins(actions, n_bins, fit=actions[fit_episodes])
    labels = {
        probing.TOKEN_BRANCHES: branch_ids(tokens, k),
        probing.ACTION_BRANCHES: branch_ids(np.concatenate([token_codes(tokens), bins], -1), k),
    }
    n = {name: int(np.unique(value).size) for name, value in labels.items()}
    held_out = {name: _held_out_counts(value[test_episodes]) for name, value in labels.items()}
    record = {
        "n_bins_per_action_coordinate": n_bins,
        "bins": "each coordinate of the previous executed action (the observation's action "
        "part) coded by its mid-rank among the fit (probe-train) episodes' values: equal-"
        "frequency bins, tied values share one (a point mass at the clip bound is its own bin)",
        "bins_used_per_coordinate": [
            int(np.unique(bins[fit_episodes][..., j]).size) for j in range(bins.shape[-1])
        ],
        "n_branches": n,
        "branches_added_by_actions": n[probing.ACTION_BRANCHES] - n[probing.TOKEN_BRANCHES],
        "held_out": {
            "n_steps": int(labels[probing.TOKEN_BRANCHES][test_episodes].size),
            "min_members": MIN_BRANCH_MEMBERS,
        }
        | held_out,
    }
    return ActionBranching(labels, record)


def tokens_only_windows(
    agent: Any,
    rollouts: Rollouts,
    layout: Any,
    branchings: Mapping[str, np.ndarray],
    *,
    ks: Sequence[int],
    seed: int,
    progress: Any = None,
) -> Any:
    """Window MLPs on the last k visible tokens alone (the observation's token part, warm-up
    as history), against `agent` (its split and resamples): never reads an action."""
    return compare_with_windows(
        agent,
        rollouts.observations[..., layout.tokens],
        rollouts.targets,
        ks=ks,
        seed=seed,
        history=rollouts.warmup_observations[..., layout.tokens],
        branchings=branchings,
        stream=TOKENS_ONLY_STREAM,
        progress=progress,
    )


def _best(table: Any) -> Any:
    """The window row with the highest tokens_2 within-branch R² (chosen on held-out steps,
    which can only flatter the window)."""

    def key(row: Any) -> float:
        value = row.window.within_branch.get(probing.TOKEN_BRANCHES)
        return value.value if value is not None else -np.inf

    return max(table.rows, key=key)


def controls_on(
    rollouts: Rollouts,
    untrained_features: np.ndarray,
    *,
    layout: Any,
    plan: Budget,
    seed: int,
    data: str,
    say: Any = print,
    windows: Any = None,
) -> dict[str, Any]:
    """Every control on one data set, scored on its own held-out episodes and resamples (the
    agent probe's split there): the `controls_by_data` block of that set. `windows`: the
    tokens-and-actions WindowTable already fitted on this set with the same seed, split and
    branchings (the in-run analysis' own), instead of fitting it again."""
    tokens = rollouts.observations[..., layout.tokens]

    def probe(features: np.ndarray) -> Any:
        return evaluate_probe(
            features,
            rollouts.targets,
            seed=seed,
            ridge=probing.PROBE_RIDGE,
            test_fraction=probing.PROBE_TEST_FRACTION,
            n_bootstrap=plan.n_bootstrap,
            target_names=probing.BELIEF_NAMES,
            branch_tokens=tokens,
            branch_k=probing.BRANCH_K,
        )

    agent = probe(rollouts.representations)
    untrained = probe(untrained_features)
    observation = probe(rollouts.observations)
    branching = action_branching(
        tokens,
        rollouts.observations[..., layout.actions],
        agent.train_episodes,
        agent.test_episodes,
    )
    test = agent.test_episodes
    held_out = rollouts.targets[test]
    excluded = set(agent.report.r2_pooled_excludes)
    common = dict(
        weights=agent.bootstrap_weights,
        branchings={name: labels[test] for name, labels in branching.labels.items()},
        confidence=agent.report.confidence,
        include=np.array([name not in excluded for name in probing.BELIEF_NAMES]),
    )
    predictions = {
        "agent": agent.test_predictions,
        "untrained_module": untrained.test_predictions,
        "observation": observation.test_predictions,
    }
    scores = {name: held_out_scores(held_out, p, **common) for name, p in predictions.items()}
    ks = list(range(1, plan.window_k_max + 1))
    if windows is None:
        say(f"{data}: windows k = 1..{ks[-1]} on tokens and actions, then on tokens only")
        window_parts = np.r_[layout.tokens, layout.actions]  # never the belief itself
        windows = compare_with_windows(
            agent,
            rollouts.observations[..., window_parts],
            rollouts.targets,
            ks=ks,
            seed=seed,
            history=rollouts.warmup_observations[..., window_parts],
            branchings=branching.labels,
        )
    else:
        say(f"{data}: windows k = 1..{ks[-1]} on tokens only (tokens and actions: fitted)")
    tokens_windows = tokens_only_windows(
        agent, rollouts, layout, branching.labels, ks=ks, seed=seed
    )
    best, best_tokens = _best(windows), _best(tokens_windows)
    differences = {
        "agent_minus_untrained_module": paired_difference(
            held_out, agent.test_predictions, untrained.test_predictions, **common
        ),
        "agent_minus_observation": paired_difference(
            held_out, agent.test_predictions, observation.test_predictions, **common
        ),
        "agent_minus_best_window": best.agent_minus_window,
        "agent_minus_best_tokens_window": best_tokens.agent_minus_window,
    }
    return {
        "data": DATA.get(data, data),
        "n_episodes": rollouts.n_episodes,
        "episode_steps": rollouts.episode_steps,
        "warmup_steps": int(rollouts.warmup_observations.shape[1]),
        "return_per_step": rollouts.mean_reward_per_step(),
        "action_branching": branching.record,
        "agent_probe": agent.report.to_dict(),
        "scores": {name: value.to_dict() for name, value in scores.items()},
        "windows": windows.to_dict(),
        "tokens_only_windows": tokens_windows.to_dict(),
        "best_window_k": best.k,
        "best_tokens_window_k": best_tokens.k,
        "differences": {name: value.to_dict() for name, value in differences.items()},
    }


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
        policy = belief_policy if belief_policy is not None else task.belief_mdp_policy()
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
    windows: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `controls_by_data` record: `controls_on` each of DATA_SETS. What the caller already
    has, collected with the same settings and sizes, is read instead of redone: `greedy` or
    `rollouts` {data set: Rollouts}, `untrained` {data set: the control's replayed
    features}, `windows` {data set: its tokens-and-actions WindowTable}."""
    env = make_env(1)
    layout, action_space = env.layout, env.single_action_space
    env.close()
    settings = probing.rollout_settings(plan, seed, make_env, action_space)
    known = dict(rollouts or {})
    if greedy is not None:
        known.setdefault("agent_greedy", greedy)
    record: dict[str, Any] = {"schema_version": CONTROLS_SCHEMA_VERSION, "data": dict(DATA)}
    for name in DATA_SETS:
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
            data,
            features,
            layout=layout,
            plan=plan,
            seed=seed,
            data=name,
            say=say,
            windows=(windows or {}).get(name),
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
) -> dict[str, Any] | None:
    """Add `controls_by_data` to a finished run's probe_metrics.json and result.json; return
    the headline (None when the run already has it and `overwrite` is off)."""
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

    checkpoint = run.final_checkpoint()
    say(f"{leaf} seed {seed}: checkpoint {checkpoint}")
    module = load_module(checkpoint)
    make_env = probing.probe_env_factory(decision_belief_in_observation=LEAVES[leaf])
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
    )


if __name__ == "__main__":
    sys.exit(main())

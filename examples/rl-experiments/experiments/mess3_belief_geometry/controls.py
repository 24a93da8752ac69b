"""Controls the trained agent cannot contaminate (issue 37, item 4), computed once by the in-run
analysis (`analysis.analyze`; for a finished run its `analysis` stage: `rl-harness analyze`).

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
result.json key `controls_by_data`: the headline (`headline`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import probing, task
from experiments.mess3_belief_geometry.spec import Budget
from rl_harness import Results
from rl_harness.analysis import (
    FitMemo,
    ProbeEvaluation,
    ProbeSettings,
    Rollouts,
    collect_rollouts,
    replay_rollouts,
)
from rl_harness.analysis.controls import ActionBranching, ControlScores, score_controls
from rl_harness.analysis.controls import action_branching as library_action_branching

CONTROLS_SCHEMA_VERSION = 1
KEY = "controls_by_data"  # in probe_metrics.json and result.json
DATA_SETS = ("agent_greedy", "belief_mdp", "random")
ACTION_BINS = probing.ACTION_BINS  # equal-frequency bins per action coordinate
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
    memo: FitMemo | None = None,
) -> ControlScores:
    """Every control on one data set (the library's `score_controls` with the study's probe
    settings), scored on its own held-out episodes and resamples (the agent probe's split
    there). `agent`: the agent's probe already evaluated on `rollouts` under these settings
    (the in-run analysis' own, with its permutation nulls): read, not fitted again. `memo`
    keeps the window fits for the incremental test on the same data (`FitMemo`)."""
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
        memo=memo,
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


def headline(record: Mapping[str, Any]) -> Results:
    """result.json's `controls_by_data/...` metrics: per data set (`<data>/<name>`),
    within-branch R² (tokens_2 unless named) of the agent and each control, and the paired
    differences with their intervals."""
    out = Results()
    for name in DATA_SETS:
        block = record.get(name)
        if block is None:
            continue
        scores, differences = block["scores"], block["differences"]
        within = ("within_branch", probing.TOKEN_BRANCHES)
        action = ("within_branch", probing.ACTION_BRANCHES)
        out.add(f"{name}/return_per_step", block["return_per_step"])
        out.add(f"{name}/agent_r2_within_branch", probing.estimate(scores["agent"], *within))
        out.add(f"{name}/agent_r2_within_action_branch", probing.estimate(scores["agent"], *action))
        for control in ("untrained_module", "observation"):
            label = "untrained" if control == "untrained_module" else control
            out.add(f"{name}/{label}_r2_within_branch", probing.estimate(scores[control], *within))
        for row in block["windows"]["windows"]:
            window = probing.estimate(row["window"], *within)
            out.add(f"{name}/window_r2_within_branch/k{row['k']}", window)
        for row in block["tokens_only_windows"]["windows"]:
            window = probing.estimate(row["window"], *within)
            out.add(f"{name}/tokens_window_r2_within_branch/k{row['k']}", window)
        for difference, label in (
            ("agent_minus_untrained_module", "agent_minus_untrained_within_branch"),
            ("agent_minus_best_window", "agent_minus_best_window_within_branch"),
            ("agent_minus_best_tokens_window", "agent_minus_best_tokens_window_within_branch"),
        ):
            out.add(f"{name}/{label}", probing.estimate(differences[difference], *within))
        out.add(
            f"{name}/action_branches_added", block["action_branching"]["branches_added_by_actions"]
        )
    return out

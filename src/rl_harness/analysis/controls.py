"""Controls and policy read-outs from one collection of rollouts (issue 50, item 1).

`score_controls(rollouts, control_features, settings=, ...)`: the agent's affine probe of its
representation beside everything that could explain it without memory, all on the agent
probe's held-out episodes and bootstrap resamples (paired intervals, `paired_difference`):

- the control module (an untrained module of the same architecture, replayed on the same
  observations: `replay_rollouts(control, rollouts)`), and the raw observation;
- window baselines on the last k visible tokens and executed actions, and on the last k
  tokens only (never an action), k in `ks` (`compare_with_windows`); the best of each (the
  highest within-branch R² over the token branching, chosen on held-out steps, which can only
  flatter the window) and the agent minus it;
- optionally the incremental test (`incremental_r2`: what the representation adds to each
  window, against what the control adds);
- branchings: equal last `branch_depth` visible tokens (`tokens_<k>`) and also equal binned
  last `branch_depth` previous actions (`tokens_actions_<k>`; `action_branching`: each action
  coordinate in equal-frequency bins by mid-rank among the probe's train episodes, with the
  counts that say what the actions added).

`policy_readouts(actions, beliefs, reference, ...)`: a Discrete policy against any reference
policy of the belief (a solver's, e.g. a Bayes-optimal guesser), on named rollout sets (the
agent's greedy and sampled play): action fractions overall, by hidden state and by belief
argmax, the reference's fractions at the same beliefs, agreement (the share of steps where
the agent's action is the reference's), and the reference's own closed-loop value as the
caller measured it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_harness.analysis.probes.branches import branch_ids
from rl_harness.analysis.probes.evaluate import ProbeEvaluation, evaluate_probe
from rl_harness.analysis.probes.paired import HeldOutScores, held_out_scores, paired_difference
from rl_harness.analysis.probes.settings import ProbeSettings
from rl_harness.analysis.probes.windows import quantile_bins
from rl_harness.analysis.windows import DEFAULT_STREAM as WINDOW_STREAM
from rl_harness.analysis.windows import (
    FitMemo,
    WindowComparison,
    WindowRegressor,
    WindowTable,
    compare_with_windows,
)

if TYPE_CHECKING:
    from rl_harness.analysis.incremental import IncrementalR2
    from rl_harness.analysis.rollouts import Rollouts

MIN_BRANCH_MEMBERS = 2  # a branch needs 2 steps to carry within-branch variance
ACTION_BINS = 3
TOKENS_ONLY_STREAM = (*WINDOW_STREAM, "tokens_only")  # the tokens-only windows' MLP streams
Progress = Callable[[str], None]


def token_codes(tokens: np.ndarray) -> np.ndarray:
    """(E, T, 1) the visible token 0..n-1 of a one-hot (E, T, n), or n where none is visible
    yet (all zeros)."""
    n = tokens.shape[-1]
    codes = tokens.argmax(-1)[..., None] + n * (tokens.max(-1, keepdims=True) == 0)
    return np.asarray(codes, dtype=np.int64)


def token_branching(depth: int) -> str:
    return f"tokens_{depth}"


def action_token_branching(depth: int) -> str:
    return f"tokens_actions_{depth}"


@dataclass(frozen=True)
class ActionBranching:
    """The two branchings of one data set and what the actions added."""

    labels: dict[str, np.ndarray]  # {tokens_<k>, tokens_actions_<k>}: (E, T) branch labels
    record: dict[str, Any]


def _held_out_counts(labels: np.ndarray, min_members: int) -> dict[str, int]:
    _, counts = np.unique(labels, return_counts=True)
    enough = counts >= min_members
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
    k: int,
    n_bins: int = ACTION_BINS,
    min_members: int = MIN_BRANCH_MEMBERS,
) -> ActionBranching:
    """Branches of equal last k visible tokens ((E, T, n) one-hot), and of those plus the last
    k binned previous actions ((E, T, a); bins from the `fit_episodes` only), with the counts
    that say whether the actions split anything."""
    bins = quantile_bins(actions, n_bins, fit=actions[fit_episodes])
    tokens_name, actions_name = token_branching(k), action_token_branching(k)
    labels = {
        tokens_name: branch_ids(tokens, k),
        actions_name: branch_ids(np.concatenate([token_codes(tokens), bins], -1), k),
    }
    n = {name: int(np.unique(value).size) for name, value in labels.items()}
    held_out = {
        name: _held_out_counts(value[test_episodes], min_members) for name, value in labels.items()
    }
    record = {
        "n_bins_per_action_coordinate": n_bins,
        "bins": "each coordinate of the previous executed action (the observation's action "
        "part) coded by its mid-rank among the fit (probe-train) episodes' values: equal-"
        "frequency bins, tied values share one (a point mass at the clip bound is its own bin)",
        "bins_used_per_coordinate": [
            int(np.unique(bins[fit_episodes][..., j]).size) for j in range(bins.shape[-1])
        ],
        "n_branches": n,
        "branches_added_by_actions": n[actions_name] - n[tokens_name],
        "held_out": {
            "n_steps": int(labels[tokens_name][test_episodes].size),
            "min_members": min_members,
        }
        | held_out,
    }
    return ActionBranching(labels, record)


def best_window(table: WindowTable, branching: str) -> WindowComparison:
    """The window row with the highest within-branch R² over `branching` (chosen on the
    held-out steps, which can only flatter the window)."""

    def key(row: WindowComparison) -> float:
        value = row.window.within_branch.get(branching)
        return value.value if value is not None else -np.inf

    return max(table.rows, key=key)


@dataclass(frozen=True)
class ControlScores:
    """Everything `score_controls` computed on one collection of rollouts."""

    agent: ProbeEvaluation
    control: ProbeEvaluation
    observation: ProbeEvaluation
    branching: ActionBranching
    scores: dict[str, HeldOutScores]  # agent, untrained_module, observation
    differences: dict[str, HeldOutScores]
    windows: WindowTable  # tokens and actions
    tokens_only_windows: WindowTable | None
    best_window_k: int
    best_tokens_window_k: int | None
    incremental: IncrementalR2 | None
    sizes: dict[str, Any]  # n_episodes, episode_steps, warmup_steps, return_per_step

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the sizes, `action_branching`, `agent_probe` (ProbeReport), `scores`,
        `windows`, `tokens_only_windows`, `best_window_k`, `best_tokens_window_k`,
        `differences` and (when computed) `incremental_r2`."""
        out = dict(self.sizes) | {
            "action_branching": self.branching.record,
            "agent_probe": self.agent.report.to_dict(),
            "scores": {name: value.to_dict() for name, value in self.scores.items()},
            "windows": self.windows.to_dict(),
        }
        if self.tokens_only_windows is not None:
            out["tokens_only_windows"] = self.tokens_only_windows.to_dict()
        out["best_window_k"] = self.best_window_k
        if self.best_tokens_window_k is not None:
            out["best_tokens_window_k"] = self.best_tokens_window_k
        out["differences"] = {name: value.to_dict() for name, value in self.differences.items()}
        if self.incremental is not None:
            out["incremental_r2"] = self.incremental.to_dict()
        return out


def score_controls(
    rollouts: Rollouts,
    control_features: np.ndarray,
    *,
    settings: ProbeSettings,
    tokens: slice,
    actions: slice,
    ks: Sequence[int],
    target_names: Sequence[str] | None = None,
    n_bins: int = ACTION_BINS,
    tokens_only: bool = True,
    incremental: bool = False,
    regressor: WindowRegressor | None = None,
    progress: Progress | None = None,
    agent: ProbeEvaluation | None = None,
    memo: FitMemo | None = None,
) -> ControlScores:
    """The agent (`rollouts.representations`) against its controls, from one collection of
    `rollouts` (see the module docstring). `control_features` are the control module's
    representations on the same observations; `tokens` and `actions` the observation's
    visible-token (one-hot) and previous-action parts (the windows read only these, never
    a belief the observation may show); `settings.branch_depth` the depth of both
    branchings; `ks` the window lengths; `incremental` adds the incremental test over the
    same windows; `regressor` is every window MLP's (default `WindowRegressor()`). `agent`:
    the agent's probe already evaluated on these rollouts under `settings` (its permutation
    nulls aside, which no control reads), used as it is instead of fitted again. `memo`
    (`FitMemo`) keeps every window MLP fitted here for later calls on the same data (the
    incremental test's windows alone are the windows on tokens and actions); with
    `incremental` and no `memo`, one of its own shares those fits within this call."""
    if settings.branch_depth is None or settings.branch_depth < 1:
        raise ValueError("score_controls needs settings.branch_depth >= 1 (the branchings)")
    if agent is not None:
        unpermuted = replace(agent.settings, n_permutations=0, n_within_permutations=0)
        if unpermuted != replace(settings, n_permutations=0, n_within_permutations=0):
            raise ValueError(
                f"the agent probe given was evaluated under {agent.settings}, not the controls' "
                f"{settings} (permutation counts aside)"
            )
    observations = rollouts.observations
    token_part = observations[..., tokens]
    say = progress or (lambda message: None)
    if memo is None and incremental:
        memo = FitMemo()

    def probe(features: np.ndarray) -> ProbeEvaluation:
        return evaluate_probe(
            features,
            rollouts.targets,
            settings,
            target_names=target_names,
            branch_tokens=token_part,
        )

    if agent is None:
        agent = probe(rollouts.representations)
    control = probe(control_features)
    observation = probe(observations)
    branching = action_branching(
        token_part,
        observations[..., actions],
        agent.train_episodes,
        agent.test_episodes,
        k=settings.branch_depth,
        n_bins=n_bins,
    )
    common = agent.scoring(branching.labels)
    held_out = rollouts.targets[agent.test_episodes]
    predictions = {
        "agent": agent.test_predictions,
        "untrained_module": control.test_predictions,
        "observation": observation.test_predictions,
    }
    scores = {name: held_out_scores(held_out, p, **common) for name, p in predictions.items()}
    window_parts = np.r_[tokens, actions]
    warmup = rollouts.warmup_observations

    def history(part: Any) -> np.ndarray | None:
        return None if warmup is None else warmup[..., part]

    only = ", then on tokens only" if tokens_only else ""
    say(f"windows k = {ks[0]}..{ks[-1]} on tokens and actions{only}")
    windows = compare_with_windows(
        agent,
        observations[..., window_parts],
        rollouts.targets,
        ks=ks,
        history=history(window_parts),
        branchings=branching.labels,
        regressor=regressor,
        memo=memo,
    )
    tokens_windows = None
    if tokens_only:
        tokens_windows = compare_with_windows(
            agent,
            token_part,
            rollouts.targets,
            ks=ks,
            history=history(tokens),
            branchings=branching.labels,
            stream=TOKENS_ONLY_STREAM,
            regressor=regressor,
            memo=memo,
        )
    by_tokens = token_branching(settings.branch_depth)
    best = best_window(windows, by_tokens)
    best_tokens = None if tokens_windows is None else best_window(tokens_windows, by_tokens)
    differences = {
        "agent_minus_untrained_module": paired_difference(
            held_out, agent.test_predictions, control.test_predictions, **common
        ),
        "agent_minus_observation": paired_difference(
            held_out, agent.test_predictions, observation.test_predictions, **common
        ),
        "agent_minus_best_window": best.agent_minus_window,
    }
    if best_tokens is not None:
        differences["agent_minus_best_tokens_window"] = best_tokens.agent_minus_window
    table = None
    if incremental:
        from rl_harness.analysis.incremental import incremental_r2

        table = incremental_r2(
            agent,
            observations[..., window_parts],
            rollouts.targets,
            representation=rollouts.representations,
            control=control_features,
            ks=ks,
            history=history(window_parts),
            branchings=branching.labels,
            regressor=regressor,
            progress=progress,
            memo=memo,
        )
    return ControlScores(
        agent=agent,
        control=control,
        observation=observation,
        branching=branching,
        scores=scores,
        differences=differences,
        windows=windows,
        tokens_only_windows=tokens_windows,
        best_window_k=best.k,
        best_tokens_window_k=None if best_tokens is None else best_tokens.k,
        incremental=table,
        sizes={
            "n_episodes": rollouts.n_episodes,
            "episode_steps": rollouts.episode_steps,
            "warmup_steps": 0 if warmup is None else int(warmup.shape[1]),
            "return_per_step": rollouts.mean_reward_per_step(),
        },
    )


# ---------------------------------------------------------------------------- read-outs


def _fractions(actions: np.ndarray, n_actions: int) -> list[float]:
    counts = np.bincount(actions.ravel(), minlength=n_actions)[:n_actions]
    fractions: list[float] = (counts / max(1, actions.size)).tolist()
    return fractions


def _by_group(actions: np.ndarray, groups: np.ndarray, n_actions: int) -> dict[str, dict[str, Any]]:
    """{group: {n_steps, fractions}} of `actions` among the steps of each group value."""
    return {
        str(int(group)): {
            "n_steps": int((groups == group).sum()),
            "fractions": _fractions(actions[groups == group], n_actions),
        }
        for group in np.unique(groups)
    }


def _discrete(name: str, values: np.ndarray, n_actions: int) -> np.ndarray:
    array = np.asarray(values)
    rounded = np.rint(array)
    if array.size and (
        not np.allclose(array, rounded) or rounded.min() < 0 or rounded.max() >= n_actions
    ):
        raise ValueError(f"{name} must be Discrete actions 0..{n_actions - 1}")
    return rounded.astype(np.int64)


def policy_readouts(
    rollouts: Mapping[str, Any],
    reference: Callable[[np.ndarray], np.ndarray],
    *,
    n_actions: int,
    hidden_states: Mapping[str, np.ndarray] | None = None,
    reference_value: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """A Discrete agent against a reference policy of the belief, per named rollout set
    (`{"greedy": Rollouts, "sampled": Rollouts}`: the agent's own play; `targets` are the
    beliefs the reference reads): its action fractions overall, by hidden state
    (`hidden_states[name]` (E, T) ints, when given) and by belief argmax; the reference's
    fractions at the same steps; `agreement`: the share of steps where the agent's action is
    the reference's. `reference` maps (..., n) beliefs to (...) actions; `reference_value`
    (e.g. {"value": ..., "standard_error": ...}) is the reference's own closed-loop value as
    the caller measured it, recorded as given."""
    if isinstance(n_actions, bool) or not isinstance(n_actions, int) or n_actions < 1:
        raise ValueError(f"n_actions must be an int >= 1, got {n_actions!r}")
    out: dict[str, Any] = {"n_actions": n_actions}
    for name, data in rollouts.items():
        beliefs = np.asarray(data.targets, dtype=np.float64)
        agent = _discrete(f"{name} actions", data.actions, n_actions)
        chosen = _discrete(f"reference actions on {name}", reference(beliefs), n_actions)
        if chosen.shape != agent.shape:
            raise ValueError(f"reference actions {chosen.shape} differ from {agent.shape}")
        argmax = beliefs.argmax(-1)
        block: dict[str, Any] = {
            "n_steps": int(agent.size),
            "agreement": float((agent == chosen).mean()),
            "fractions": _fractions(agent, n_actions),
            "reference_fractions": _fractions(chosen, n_actions),
            "by_belief_argmax": _by_group(agent, argmax, n_actions),
            "reference_by_belief_argmax": _by_group(chosen, argmax, n_actions),
        }
        states = (hidden_states or {}).get(name)
        if states is not None:
            states = np.asarray(states)
            if states.shape != agent.shape:
                raise ValueError(f"hidden states {states.shape} differ from {agent.shape}")
            block["by_hidden_state"] = _by_group(agent, states, n_actions)
            block["reference_by_hidden_state"] = _by_group(chosen, states, n_actions)
        out[name] = block
    if reference_value is not None:
        out["reference_value"] = dict(reference_value)
    return out

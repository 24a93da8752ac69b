"""Memory beyond a window (issue 52, item 1): the library's incremental R² on the agent's data,
in-run (for a finished run: the leaf's `analysis` stage, `rl-harness analyze LEAF RUN`).

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
`incremental_r2`: the headline (`headline`).

Several untrained initialisations (the budget's `untrained_inits`, the memory leaves 3: one
random network is one draw): init j's module is seeded `analysis.untrained_seed(seed, j)`
(init 0 the one control of every other stage, with the seed it always had) and is the
library's control `control_names(n)[j]` ("control", "control_1", ...: init 0 keeps the
single control's name, so its read-out's fit streams and its c_0 are those of a one-init
record). Such a record has schema_version 2, `untrained_inits` n, and a table with `controls`
(per k each control's c_j, c_j - a, b - c_j; `agent_minus_controls_min` / `_mean`; the
claim's p in `p_values_min_over_controls`: the library's docstring). One init: version 1 as
before, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import controls, probing
from rl_harness import Results
from rl_harness.analysis import (
    FitMemo,
    ProbeEvaluation,
    Rollouts,
    WindowRegressor,
    evaluate_probe,
    incremental_r2,
)

INCREMENTAL_SCHEMA_VERSION = 1  # one untrained init; 2: several (`untrained_inits`, `controls`)
SEVERAL_INITS_SCHEMA_VERSION = 2
UNTRAINED_SEEDS = (
    'init 0: stream_seed(seed, "study", "untrained") (the control of every other stage); '
    'init j >= 1: stream_seed(seed, "study", "untrained", str(j))'
)
KEY = "incremental_r2"  # in probe_metrics.json and result.json: on the greedy rollouts
# The same test on the agent's sampled rollouts: the policy it trained and is scored with.
# Where the greedy policy earns far less than the sampled one (the memory point's runs:
# 0.04-0.21 against 0.19-0.74 per step), the greedy rollouts visit states the trained policy
# rarely reaches; which data the reading rests on is a choice that can change it, so both are
# recorded.
KEY_SAMPLED = "incremental_r2_sampled"
DATA = (
    "the trained agent's greedy rollouts (its own actions), the analysis' episodes; the "
    "untrained module replays the same observations"
)
DATA_SAMPLED = (
    "the trained agent's sampled rollouts (its own sampled actions, the analysis' episodes and "
    "seeds); the untrained module replays the same observations"
)
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


def control_names(n: int) -> list[str]:
    """The library's control names of n untrained inits: "control" (init 0), "control_<j>"."""
    return ["control", *(f"control_{j}" for j in range(1, n))]


def _untrained(features: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    return [features] if isinstance(features, np.ndarray) else list(features)


def measure(
    rollouts: Rollouts,
    untrained_features: np.ndarray | Sequence[np.ndarray],
    *,
    agent: ProbeEvaluation,
    branchings: Mapping[str, np.ndarray],
    layout: Any,
    plan: Any,
    say: Any = print,
    data: str = DATA,
    memo: FitMemo | None = None,
    ks: Sequence[int] | None = None,
    regressor: WindowRegressor | None = None,
) -> dict[str, Any]:
    """The `incremental_r2` record on the agent's `rollouts` (greedy unless `data` says
    otherwise; its probe `agent`, the branchings {name: (E, T) labels}) with the untrained
    module's replayed features (one array, or one per init in init order); `memo`: the
    controls' window fits on the same rollouts, whose windows alone are (a) (read, not trained
    again: the same numbers bit for bit). `ks` (default 1..window_k_max) and `regressor` (the
    windows' MLP, default the library's) are for checks of the test itself
    (window_capacity.py)."""
    parts = np.r_[layout.tokens, layout.actions]  # what the agent read, never the belief
    ks = list(ks) if ks is not None else list(range(1, plan.window_k_max + 1))
    untrained = _untrained(untrained_features)
    say(
        f"incremental R²: windows k = 1..{ks[-1]} alone, with the agent's, with the untrained's "
        f"({len(untrained)} init{'s' if len(untrained) > 1 else ''})"
    )
    several = len(untrained) > 1
    table = incremental_r2(
        agent,
        rollouts.observations[..., parts],
        rollouts.targets,
        representation=rollouts.representations,
        control=None if several else untrained[0],
        controls=dict(zip(control_names(len(untrained)), untrained, strict=True))
        if several
        else None,
        ks=ks,
        history=rollouts.warmup_observations[..., parts],
        branchings=branchings,
        progress=say,
        memo=memo,
        regressor=regressor,
    )
    record = {
        "schema_version": SEVERAL_INITS_SCHEMA_VERSION if several else INCREMENTAL_SCHEMA_VERSION,
        "data": data,
        "inputs": INPUTS,
        "n_episodes": rollouts.n_episodes,
        "episode_steps": rollouts.episode_steps,
        "branchings": sorted(branchings),
        "table": table.to_dict(),
    }
    if several:
        record |= {"untrained_inits": len(untrained), "untrained_seeds": UNTRAINED_SEEDS}
    return record


def own_probe(
    rollouts: Rollouts, layout: Any, plan: Any, seed: int
) -> tuple[ProbeEvaluation, dict[str, np.ndarray]]:
    """The analysis' probe of the agent on `rollouts` (`agent_probe`) and the study's
    branchings on its split (`controls.action_branching`): what the test reads besides the
    rollouts."""
    agent = agent_probe(rollouts, layout, plan, seed)
    branching = controls.action_branching(
        rollouts.observations[..., layout.tokens],
        rollouts.observations[..., layout.actions],
        agent.train_episodes,
        agent.test_episodes,
    )
    return agent, branching.labels


def measure_with_own_probe(
    rollouts: Rollouts,
    untrained_features: np.ndarray | Sequence[np.ndarray],
    *,
    layout: Any,
    plan: Any,
    seed: int,
    data: str,
    say: Any = print,
) -> dict[str, Any]:
    """The incremental test on `rollouts` (described by `data`) with its own probe of the
    agent's representation (the analysis' probe settings and seed, so its split and resamples
    are those of the greedy probe's episode indices) and its own action branching;
    `untrained_features` is the untrained module replayed on `rollouts` (or one per init). The
    analysis reads the sampled rollouts this way (`KEY_SAMPLED`, `DATA_SAMPLED`); its greedy
    record reuses the probe and branching the analysis already made."""
    agent, branchings = own_probe(rollouts, layout, plan, seed)
    return measure(
        rollouts,
        untrained_features,
        agent=agent,
        branchings=branchings,
        layout=layout,
        plan=plan,
        say=say,
        data=data,
    )


def headline(record: Mapping[str, Any]) -> Results:
    """result.json's `incremental_r2/...` metrics: per k (`k<k>/<name>`), global and within
    tokens_2 (`_within_branch`), R²(a), R²(b), R²(c), b - a and b - c with their intervals,
    and b - a's and b - c's Holm p (`<name>_p_holm`). A record of several untrained inits has
    no single (c): `untrained_inits` (n), and per k, for init j, `r2_control_<j>` and
    `agent_minus_control_<j>` (its p Holm over k x inits), and `agent_minus_controls_min` (the
    claim: min over inits, its p the largest of theirs) and `agent_minus_controls_mean`."""
    table = record["table"]
    if "controls" in table:
        return _headline_several(table)
    holm = table["p_values_holm"]
    out = Results()
    for index, row in enumerate(table["rows"]):
        for score, path in SCORES.items():
            name = f"k{row['k']}/{{}}" + ("" if score == "global" else "_within_branch")
            for part in ("window", "agent", "control"):
                out.add(name.format(f"r2_{part}"), probing.estimate(row[part], *path))
            for quantity in ("agent_increment", "agent_minus_control"):
                out.add(name.format(quantity), probing.estimate(row[quantity], *path))
                out.add(name.format(quantity) + "_p_holm", holm[quantity][score][index])
    return out


# The scores of the headline: global, and within tokens_2 (the record's paths to each).
SCORES = {
    "global": ("r2_pooled",),
    probing.TOKEN_BRANCHES: ("within_branch", probing.TOKEN_BRANCHES),
}


def _headline_several(table: Mapping[str, Any]) -> Results:
    """`headline` of a table with several controls (library `controls`, init order)."""
    names = table["controls"]
    increment_holm = table["p_values_holm"]["agent_increment"]
    holm, minimum = table["p_values_holm_controls"], table["p_values_min_over_controls"]
    out = Results()
    out.add("untrained_inits", len(names))
    for index, row in enumerate(table["rows"]):
        for score, path in SCORES.items():
            name = f"k{row['k']}/{{}}" + ("" if score == "global" else "_within_branch")
            for part in ("window", "agent"):
                out.add(name.format(f"r2_{part}"), probing.estimate(row[part], *path))
            out.add(name.format("agent_increment"), probing.estimate(row["agent_increment"], *path))
            out.add(name.format("agent_increment") + "_p_holm", increment_holm[score][index])
            for init, control in enumerate(names):
                block = row["controls"][control]
                out.add(
                    name.format(f"r2_control_{init}"), probing.estimate(block["control"], *path)
                )
                minus = name.format(f"agent_minus_control_{init}")
                out.add(minus, probing.estimate(block["agent_minus_control"], *path))
                out.add(minus + "_p_holm", holm[score][control][index])
            minus = name.format("agent_minus_controls_min")
            out.add(minus, probing.estimate(row["agent_minus_controls_min"], *path))
            out.add(minus + "_p_holm", minimum[score][index])
            mean = row["agent_minus_controls_mean"]
            out.add(name.format("agent_minus_controls_mean"), probing.estimate(mean, *path))
    return out

"""The memory yardstick of an occupancy-control run (issue 37 item 3): every within-branch R²
read as "about m steps of memory", beside baselines that need no training.

On the agent's greedy probe rollouts (the same collection `analysis.analyze` probes: same seeds,
warm-up, sizes), with the agent probe's split, its branches of equal last BRANCH_K visible
tokens and its bootstrap resamples (`rl_harness.analysis.memory_yardstick`; definitions in
the library's docs/memory_yardstick.md):

- exact filters of only the last m steps, m = 1..M_MAX: the last m visible tokens and the m
  executed actions in that span (the observation's previous-action part), measure then move
  (b <- normalize(b diag(E[:, v])) U_a, the decision belief's own recursion at delay 1),
  from a prior at the oldest step: PRIORS["stationary"] the control chain's stationary law
  (the env's start law), PRIORS["policy"] the agent's own state law (the mean decision belief
  on the train episodes). The filter takes the actions as given; it does not use what they
  reveal about older tokens through the policy that chose them (the window MLPs on tokens
  and actions can). Each is read by the agent's affine probe: R², within-branch R², the
  agent minus each (paired), and the m the agent's within-branch R² is worth;
- the share of the decision belief's variance that lies within the branches;
- untrained random ReLU features of the agent's input window (the last `context` steps of
  visible token and executed action, `window_features` with presence flags; never the
  belief), widths RANDOM_WIDTHS, stream ("study", "yardstick", "random_features", "width<w>");
- UNTRAINED_SEEDS untrained modules of the run's architecture and model config, each replayed
  on the agent's observations (as the single untrained control is), seeds from
  ("study", "yardstick", "untrained", "<i>"): mean and range;
- the window baselines' MLP on the agent's representation (like for like with the windows
  of probe_metrics.json, which apply it to the last k tokens and actions).

Writes `yardstick.json` into the run's results folder. For a finished run, the leaf's
`analysis` stage (the whole in-run analysis, this included, on its recorded checkpoints):

    uv run rl-harness analyze experiments.mess3_belief_geometry.<leaf>.experiment [RUN...]
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ray.rllib.core.rl_module.rl_module import RLModule

from experiments.mess3_belief_geometry import probing, task
from rl_harness import write_json
from rl_harness.analysis import (
    ProbeSettings,
    Rollouts,
    branch_ids,
    collect_rollouts,
    equivalent_m,
    evaluate_probe,
    memory_yardstick,
    mlp_probe,
    random_feature_probe,
    replay_rollouts,
    spread,
    untrained_like,
    window_features,
    within_branch_variance_fraction,
)
from rl_harness.envs.hmm import window_beliefs
from rl_harness.envs.mess3 import control_chain_model, mess3_emission
from rl_harness.envs.mess3.control import tilted_transitions
from rl_harness.seeding import stream_seed

YARDSTICK_FILE = "yardstick.json"
YARDSTICK_SCHEMA_VERSION = 1
M_MAX = 6  # as the window baselines' k = 1..6
PRIORS = ("stationary", "policy")
RANDOM_WIDTHS = (64, 256, 1024)
# The random features' affine probe: the agent's PROBE_RIDGE (1e-6) leaves a 1024-wide fit
# ill-conditioned (rank 1020 of 1024 on 12,288 train steps): token guess, seed 2, width 1024,
# held-out within-branch R² 0.307 at 1e-6 against 0.840 at 1e-3 and 0.841 at 0.1 and 1, with
# the same train R² (0.992). 1e-3 is negligible shrinkage for features of scale 1.
RANDOM_FEATURE_RIDGE = 1e-3
DEFAULT_CONTEXT = 64  # the random features' window when the module's config names none
UNTRAINED_SEEDS = 5
STREAM = ("study", "yardstick")

COMPETING = {
    "filters": "The agent's within-branch R² could reflect only a few steps of exact "
    "filtering: the m-step filters (tokens and executed actions) say how many steps of perfect "
    "memory the same affine probe needs to reach it. Branches hold equal tokens only: the "
    "filter's actions vary within them, so even m = 1 (the newest token and the previous "
    "action) can score high there.",
    "actions": "The executed actions carry the agent's own memory (its policy chose them from "
    "older tokens): a window of tokens and actions can beat the m-step filter, and the filter "
    "and windows here are fed the agent's own actions (controls on other action sources: "
    "probe_metrics.json's controls).",
    "prior": "The filter's prior matters for short windows: 'stationary' is the untilted "
    "chain's law, 'policy' the agent's own state law; the better one is the fairer yardstick.",
    "random_features": "A wide untrained nonlinear map of the same input window, read by the "
    "same affine probe, could already give the number.",
    "untrained": "One untrained draw could be lucky or unlucky: several initialisations of the "
    "run's own architecture and config give the spread.",
    "mlp": "The window baselines are read by an MLP, the agent by an affine probe: the agent "
    "read by the same MLP makes the comparison like for like.",
}


def decision_step_matrices(
    observations: np.ndarray,
    layout: Any,
    low: float,
    high: float,
    point: task.TaskPoint = task.FLAGSHIP,
):
    """(E, S, 3, 3) per-step updates of the decision belief from (E, S, obs) observations
    (the reset observation first) at `point`: diag(P(newest visible token | state))
    U_{previous executed action}; a missing token measures nothing; the reset step is the
    identity."""
    hmm = control_chain_model(point.alpha, point.mixing)
    emission = mess3_emission(point.alpha)  # (state, token)
    tokens = observations[..., layout.tokens].astype(np.float64)
    likelihood = tokens @ emission.T + (1.0 - tokens.sum(-1, keepdims=True))
    actions = low + (high - low) * observations[..., layout.actions].astype(np.float64)
    matrices = likelihood[..., :, None] * tilted_transitions(hmm.transition_matrix, actions)
    matrices[:, 0] = np.eye(hmm.n_states)
    return matrices


def filter_beliefs_by_m(
    rollouts: Rollouts,
    layout: Any,
    low: float,
    high: float,
    prior: np.ndarray,
    ms: Sequence[int],
    point: task.TaskPoint = task.FLAGSHIP,
) -> dict[int, np.ndarray]:
    """{m: (E, T, 3)} m-step filter beliefs at the recorded steps (warm-up steps as history;
    the first warm-up observation is the reset's)."""
    observations = rollouts.observations
    if rollouts.warmup_observations is not None:
        observations = np.concatenate([rollouts.warmup_observations, observations], axis=1)
    matrices = decision_step_matrices(observations, layout, low, high, point)
    first = observations.shape[1] - rollouts.episode_steps
    return {m: window_beliefs(matrices, prior, m)[:, first:] for m in ms}


def greedy_rollouts(module: RLModule, plan: Any, seed: int, make_env: Any) -> Rollouts:
    """The agent's greedy probe rollouts exactly as `analysis.analyze` collects them."""
    env = make_env(1)
    action_space = env.single_action_space
    env.close()
    return collect_rollouts(
        module,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        policy="greedy",
        **probing.rollout_settings(plan, seed, make_env, action_space),
    )


def _within(scores: Any) -> float | None:
    value = scores.within_branch.get(probing.TOKEN_BRANCHES)
    return None if value is None else value.value


def measure(
    results_dir: Path | None,
    *,
    plan: Any,
    seed: int,
    label: str,
    module: RLModule,
    decision_belief_in_observation: bool,
    greedy: Rollouts | None = None,
    agent: Any = None,
    say: Any = print,
) -> dict[str, Any]:
    """The yardstick record of the trained `module` (a run with this seed and probe budget);
    `greedy`: its greedy probe rollouts when the caller has them, `agent`: the agent probe
    already fitted on them (analyze's, same settings; its nulls are not read). Writes
    yardstick.json into `results_dir` unless it is None."""
    started = time.perf_counter()
    point = task.point_of(plan)
    make_env = probing.probe_env_factory(decision_belief_in_observation, point)
    env = make_env(1)
    layout, space = env.layout, env.single_action_space
    env.close()
    if greedy is None:
        say(f"greedy rollouts of the agent ({plan.probe_episodes} episodes)")
        greedy = greedy_rollouts(module, plan, seed, make_env)
    targets = greedy.targets
    tokens = greedy.observations[..., layout.tokens]
    branchings = {probing.TOKEN_BRANCHES: branch_ids(tokens, probing.BRANCH_K)}

    def probe(features: np.ndarray) -> Any:
        return evaluate_probe(
            features,
            targets,
            ProbeSettings(
                seed=seed,
                ridge=probing.PROBE_RIDGE,
                test_fraction=probing.PROBE_TEST_FRACTION,
                n_bootstrap=plan.n_bootstrap,
                branch_depth=probing.BRANCH_K,
            ),
            target_names=probing.BELIEF_NAMES,
            branch_tokens=tokens,
        )

    if agent is None:  # analyze's agent probe: the same split, resamples
        agent = probe(greedy.representations)
    low, high = float(space.low.flat[0]), float(space.high.flat[0])
    priors = {
        "stationary": control_chain_model(point.alpha, point.mixing).initial,
        "policy": targets[agent.train_episodes].reshape(-1, targets.shape[-1]).mean(axis=0),
    }
    ms = range(1, M_MAX + 1)
    tables = {}
    for name, prior in priors.items():
        say(f"filters of the last m steps from the {name} prior")
        beliefs = filter_beliefs_by_m(greedy, layout, low, high, prior, ms, point)
        tables[name] = memory_yardstick(
            agent,
            beliefs,
            targets,
            branchings=branchings,
            ridge=probing.PROBE_RIDGE,
        )
    agent_within = _within(tables["stationary"].agent)
    equivalent = {}
    for name, table in tables.items():
        # Every m counts here: the branches hold equal tokens, but the filter also reads the
        # executed actions, which vary within a branch (under random actions the m = 1 filter,
        # the newest token and the previous action, already gets 0.805 within branches).
        reach, interpolated = equivalent_m(
            agent_within, {row.details["m"]: _within(row.scores) for row in table.rows}
        )
        equivalent[name] = {"reaches_agent_at_m": reach, "interpolated_m": interpolated}

    context = int((module.model_config or {}).get("context", DEFAULT_CONTEXT))
    parts = np.r_[layout.tokens, layout.actions]  # never the belief itself
    say(f"random ReLU features of the last {context} tokens and actions {RANDOM_WIDTHS}")
    window = window_features(
        greedy.observations[..., parts],
        context,
        None if greedy.warmup_observations is None else greedy.warmup_observations[..., parts],
    )
    random_rows = random_feature_probe(
        window,
        targets,
        agent,
        widths=RANDOM_WIDTHS,
        seed=seed,
        branchings=branchings,
        ridge=RANDOM_FEATURE_RIDGE,
        stream=(*STREAM, "random_features"),
    )
    del window
    say("the windows' MLP on the agent's representation")
    mlp = mlp_probe(
        greedy.representations,
        targets,
        agent,
        seed=seed,
        name="agent",
        branchings=branchings,
        stream=(*STREAM, "mlp"),
    )
    say(f"{UNTRAINED_SEEDS} untrained initialisations replayed on the agent's observations")
    seeds = [stream_seed(seed, *STREAM, "untrained", str(i)) for i in range(UNTRAINED_SEEDS)]
    reports = [
        probe(
            replay_rollouts(untrained_like(module, s), greedy, steps_per_call=probing.REPLAY_STEPS)
        ).report
        for s in seeds
    ]
    test = agent.test_episodes
    labels = branchings[probing.TOKEN_BRANCHES]
    record = {
        "schema_version": YARDSTICK_SCHEMA_VERSION,
        "recipe": label,
        "seed": seed,
        "budget": dict(plan.__dict__),
        "branching": f"{probing.TOKEN_BRANCHES}: equal last {probing.BRANCH_K} visible tokens",
        "data": "the agent's greedy probe rollouts (its own actions), the agent probe's split",
        "definitions": {
            "filters": f"exact filter of the last m steps (m = 1..{M_MAX}): visible tokens and "
            "the executed actions in that span, b <- normalize(b diag(E[:, v])) U_a, from a "
            "prior at the oldest step (stationary: the control chain's law; policy: the mean "
            "decision belief on the train episodes); affine probe to the decision belief",
            "random_features": f"ReLU(z W + c) of the last {context} steps of visible token and "
            "executed action (window_features, presence flags), z standardized on the train "
            "steps, W ~ N(0, 1/n_inputs), c ~ N(0, 1); affine probe with ridge "
            f"{RANDOM_FEATURE_RIDGE:g} (the agent's {probing.PROBE_RIDGE:g} is ill-conditioned "
            "at width 1024)",
            "untrained": "the run's module class and model config with fresh weights per seed, "
            "replayed on the agent's observations; affine probe of its representation",
            "mlp": "the window baselines' MLP (WindowRegressor defaults) on the agent's "
            "representation",
        },
        "priors": {name: [float(v) for v in prior] for name, prior in priors.items()},
        "agent": {"r2": agent.report.r2_pooled.value, "r2_within_branch": agent_within},
        "equivalent_memory": equivalent,
        "within_branch_variance_fraction": {
            "all_steps": within_branch_variance_fraction(targets, labels),
            "held_out": within_branch_variance_fraction(targets[test], labels[test]),
        },
        "filters_r2_within_branch": {
            name: {f"m{row.details['m']}": _within(row.scores) for row in table.rows}
            for name, table in tables.items()
        },
        "random_features_r2_within_branch": {
            f"width{row.details['width']}": _within(row.scores) for row in random_rows
        },
        "untrained": {
            "seeds": seeds,
            "model_config": dict(module.model_config or {}),
            "r2": spread([r.r2_pooled.value if r.r2_pooled else None for r in reports]),
            "r2_within_branch": spread(
                [
                    r.within_branch.r2_pooled.value
                    if r.within_branch and r.within_branch.r2_pooled
                    else None
                    for r in reports
                ]
            ),
        },
        "mlp_r2_within_branch": {"agent": _within(mlp.scores)},
        "mlp_r2": {"agent": None if mlp.scores.r2_pooled is None else mlp.scores.r2_pooled.value},
        "competing_explanations": COMPETING,
        "memory_yardstick": {name: table.to_dict() for name, table in tables.items()},
        "random_features": [row.to_dict() for row in random_rows],
        "mlp": {"agent": mlp.to_dict()},
        "wall_time_s": round(time.perf_counter() - started, 3),
    }
    if results_dir is not None:
        write_json(Path(results_dir) / YARDSTICK_FILE, record)
        say(f"wrote {YARDSTICK_FILE} ({record['wall_time_s']:.0f} s)")
    return record


def headline(record: Mapping[str, Any]) -> dict[str, Any]:
    """What probe_metrics.json carries of yardstick.json (the file holds the rest)."""
    keys = (
        "equivalent_memory",
        "filters_r2_within_branch",
        "within_branch_variance_fraction",
        "random_features_r2_within_branch",
        "mlp_r2_within_branch",
    )
    return (
        {"file": YARDSTICK_FILE}
        | {key: record[key] for key in keys}
        | {"untrained_r2_within_branch": record["untrained"]["r2_within_branch"]}
    )

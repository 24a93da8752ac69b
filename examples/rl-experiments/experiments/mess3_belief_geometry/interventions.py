"""Causal belief interventions (issue 30), in-run (for a finished run: `rl-harness analyze`).

In-run: `run_interventions` edits the residual where the belief probe reads it and scores the
action shift against the belief-MDP policy's (analysis.belief_interventions); the leaves that
run them (`reward_only`, `next_token_aux`) call it from `analysis.analyze`.

interventions.json (schema INTERVENTIONS_SCHEMA_VERSION): recipe, checkpoint, seed, sizes,
what the target, counterfactuals, shifts and controls are (sentences), report
(rl_harness.analysis.InterventionReport.to_dict(): modules {agent, control} -> layer ->
{probe_r2_pooled, probe_rank, edits {corners, other_steps} -> {belief, random_orthogonal:
{correlation, cosine, fraction, policy_shift_rms, optimal_shift_rms}, belief_minus_random,
edit_norm_mean, representation_norm_mean, probe_miss_rms, value_shift_mean}}, differences
{agent_minus_control}), figure (interventions.png), figure_points, wall_time_s.

For a finished run (one made by an older commit, or whose analysis failed), the leaf's
`analysis` stage reruns the whole analysis, these included, on its recorded checkpoints:

    uv run rl-harness analyze experiments.mess3_belief_geometry.<leaf>.experiment [RUN...]
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ray.rllib.core.rl_module.rl_module import RLModule

from experiments.mess3_belief_geometry import probing, task
from experiments.mess3_belief_geometry.spec import Budget
from rl_harness import write_json
from rl_harness.analysis import (
    Rollouts,
    belief_interventions,
    corner_beliefs,
    other_step_beliefs,
    plot_action_shifts,
    rllib_action_transform,
)
from rl_harness.seeding import stream_rng

# interventions.json; 2: pre-clip shifts and clipped fractions beside the post-clip scores.
INTERVENTIONS_SCHEMA_VERSION = 2
INTERVENTION_LAYERS = ("block_2", "final_norm")  # the middle block; what the heads read
INTERVENTIONS_FILE, INTERVENTIONS_FIGURE = "interventions.json", "interventions.png"


def intervention_rollouts(rollouts: Rollouts, plan: Budget) -> Rollouts:
    """The first `plan.intervention_episodes` episodes and `plan.intervention_steps`
    recorded steps of `rollouts` (their warm-up kept whole): what the interventions use."""
    n, steps = plan.intervention_episodes, plan.intervention_steps
    if n > rollouts.n_episodes or steps > rollouts.episode_steps:
        raise ValueError(
            f"the interventions use {n} episodes x {steps} steps; the rollouts hold "
            f"{rollouts.n_episodes} x {rollouts.episode_steps}"
        )
    return rollouts.head(n, steps)  # every per-episode array, the warm-up actions too


def run_interventions(
    results_dir: Path,
    *,
    label: str,
    module: RLModule,
    control: RLModule,
    rollouts: Rollouts,
    plan: Budget,
    seed: int,
    checkpoint: Path | str,
    say: Any = print,
    optimal_policy: Any = None,
) -> dict[str, Any]:
    """Causal belief interventions on the agent and the untrained control: write
    interventions.json and interventions.png into `results_dir`; return the headline.

    `rollouts`: the agent's greedy rollouts (`intervention_rollouts`). At each of
    INTERVENTION_LAYERS a probe of the decision belief is fitted on 3/4 of the episodes
    (per module); on the held-out ones the residual there is edited (minimum norm) so the
    probe reads a counterfactual belief b', a corner of the simplex or another episode's
    belief at a random step, and the rest of the module runs from it. Its greedy action
    shift (env units) is scored against the belief-MDP policy's shift from b to b'
    (`optimal_policy`, default `task.belief_mdp_policy()`), beside a random edit of the same
    length orthogonal to the probe and the same edit of the untrained module.
    """
    started = time.perf_counter()
    if optimal_policy is None:
        try:
            optimal_policy = task.belief_mdp_policy(point=task.point_of(plan))
        except ImportError as error:
            skipped = {"skipped": f"unavailable: rl_harness.envs.mess3.solvers ({error})"}
            write_json(Path(results_dir) / INTERVENTIONS_FILE, skipped)
            return skipped
    counterfactuals = {
        "corners": corner_beliefs(
            rollouts.targets, stream_rng(seed, "study", "interventions", "corners")
        ),
        "other_steps": other_step_beliefs(
            rollouts.targets, stream_rng(seed, "study", "interventions", "other_steps")
        ),
    }
    size = f"{rollouts.n_episodes} episodes x {rollouts.episode_steps} steps"
    say(f"interventions at {', '.join(INTERVENTION_LAYERS)} ({size})")
    report = belief_interventions(
        module,
        rollouts,
        layers=INTERVENTION_LAYERS,
        optimal_policy=optimal_policy,
        counterfactuals=counterfactuals,
        seed=seed,
        control=control,
        action_transform=rllib_action_transform(module.action_space),
        pre_clip_transform=rllib_action_transform(module.action_space, unclipped=True),
        ridge=probing.PROBE_RIDGE,
        test_fraction=probing.PROBE_TEST_FRACTION,
        n_bootstrap=plan.n_bootstrap,
        progress=say,
    )
    figure = plot_action_shifts(
        Path(results_dir) / INTERVENTIONS_FIGURE,
        report,
        title=f"{label}: greedy action shift after editing the probed belief, against the "
        "belief-MDP policy's",
    )
    record = {
        "schema_version": INTERVENTIONS_SCHEMA_VERSION,
        "recipe": label,
        "checkpoint": str(checkpoint),
        "seed": seed,
        "sizes": {
            "episodes": rollouts.n_episodes,
            "warmup_steps": plan.warmup_steps,
            "steps": rollouts.episode_steps,
            "n_bootstrap": plan.n_bootstrap,
        },
        "target": "info['decision_belief'] (b): the probe's target at each layer",
        "counterfactuals": {
            "corners": "b' = a uniformly drawn corner of the simplex, per step",
            "other_steps": "b' = the decision belief of a uniformly drawn step of another "
            "episode, per step",
        },
        "optimal_shift": "belief-MDP policy (belief_vi, delay "
        f"{task.DELAY}) at b' minus at b, in env units",
        "policy_shift": "greedy action (the policy's mean, unsquashed and clipped as the env "
        "gets it) with the edit minus without; the carried K/V cache is never edited",
        "pre_clip": "per edit, the same scores of the policy mean's shift before the clip "
        "(the head is linear; unsquashed to env units without clipping): what the edit did "
        "to the policy, whether or not the env could carry it out",
        "clipped_fraction": "per edit, the fraction of action coordinates the unsquashing "
        "clipped (the policy mean outside [-1, 1]): unedited, after the belief edit, after "
        "the random edit",
        "controls": {
            "random_orthogonal": "an edit of the same length per step along a random "
            "direction orthogonal to the probe's subspace",
            "control": "the untrained module of probe_metrics.json's controls (same "
            "architecture, fresh seeded weights), its own probes fitted on the same rollouts "
            "and split",
        },
        "report": report.to_dict(),
        "figure": INTERVENTIONS_FIGURE,
        "figure_points": figure,
        "wall_time_s": round(time.perf_counter() - started, 3),
    }
    write_json(Path(results_dir) / INTERVENTIONS_FILE, record)
    say(f"wrote {INTERVENTIONS_FILE} ({record['wall_time_s']:.0f} s)")
    return intervention_headline(record)


def intervention_headline(record: Mapping[str, Any]) -> dict[str, Any]:
    """{layer: {counterfactual: {agent, agent_random, untrained, agent_correlation,
    agent_pre_clip, agent_clipped_fraction}}}: the fraction of the optimal shift each edit
    achieved (and the agent's correlation; its fraction before the clip, and the share of
    its action coordinates clipped after the belief edit), from an interventions.json
    record (schema 1 records have no pre-clip fields: None)."""
    if "report" not in record:
        return dict(record)
    modules = record["report"]["modules"]
    out: dict[str, Any] = {"file": INTERVENTIONS_FILE}
    for layer in record["report"]["layers"]:
        out[layer] = {}
        for name in record["report"]["counterfactuals"]:
            agent = modules["agent"][layer]["edits"][name]
            control = modules.get("control", {}).get(layer, {}).get("edits", {}).get(name)
            out[layer][name] = {
                "agent": probing.value(agent["belief"], "fraction"),
                "agent_random": probing.value(agent["random_orthogonal"], "fraction"),
                "untrained": None
                if control is None
                else probing.value(control["belief"], "fraction"),
                "agent_correlation": probing.value(agent["belief"], "correlation"),
                "agent_pre_clip": probing.value(
                    (agent.get("pre_clip") or {}).get("belief"), "fraction"
                ),
                "agent_clipped_fraction": (agent.get("clipped_fraction") or {}).get("belief"),
            }
    return out

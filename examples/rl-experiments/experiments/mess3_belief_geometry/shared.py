"""MESS3 occupancy control: what every leaf shares (the task, the solver ceilings, the analysis).

Each leaf's experiment.py holds its own agent, PPO config chain and budget; this module holds
only what must stay identical between them so that their numbers compare:

- the task (`env_config`): the control chain with MESS3 emissions (alpha 0.85), a 2-d tilt
  action in [-5, 5]^2, reward 1 in state 2 minus KL(tilted || base) / 4, tokens seen one
  step late (delay 1), 1024-step episodes (rl_harness.envs.mess3.OccupancyControlTask;
  definitions in the library's envs/AGENTS.md);
- the ceilings (`solver_values`): exact long-run reward per step of the oracle (state
  known), the belief MDP (the best any agent can do), the best policy on the last 2
  visible tokens and the best memoryless one (rl_harness.envs.mess3.solvers, cached on disk);
- the analysis (`analyze`): return per step under sampled and greedy actions, and an affine
  probe of the agent's representation for the decision belief on its greedy rollouts, set
  against everything that could explain it without memory, all on the agent's own
  held-out steps (same targets, branches, train/test split and bootstrap resamples): an
  untrained module of the same architecture (replayed on the agent's observations), the raw
  observation, and window baselines (an MLP on the last k visible tokens and executed
  actions, k = 1..window_k_max); within branches of equal last BRANCH_K tokens and of equal
  tokens and binned actions; permutation nulls (global, and conditional within branches);
  paired bootstrap differences; every block's residual; R² over training from the run's
  checkpoints; the plots.

probe_metrics.json (schema_version 2). Estimates are {value, low, high} (95% percentile
intervals over bootstrap resamples of the held-out episodes); a null record is {statistic,
observed, p_value, p_value_floor = 1 / (n_permutations + 1), n_permutations, null_mean,
null_q95, null_r2_pooled}; "scores" blocks are {r2_pooled, within_branch: {tokens_2,
tokens_actions_2}, n_bootstrap, confidence}.

    recipe, task, aux_weight, budget, checkpoint, env_steps, training_iterations,
    representation, target, n_episodes, branch_k
    branchings        {tokens_2, tokens_actions_2}: what each branching groups
    probe             the agent's ProbeReport (rl_harness.analysis.ProbeReport.to_dict):
                      r2_pooled, r2, rmse..., within_branch {k, r2_pooled, ..., permutation:
                      the conditional null (targets shuffled within branches)}, permutation
                      (the global null)
    controls          data (a sentence), untrained_module_probe, observation_probe: ProbeReports
                      on the agent's rollouts (no nulls)
    scores            {agent, untrained_module, observation}: scores blocks
    differences       {agent_minus_untrained_module, agent_minus_observation,
                      agent_minus_best_window}: scores blocks of paired differences (same
                      resamples for both), best_window_k (highest tokens_2 within-branch R²)
    windows           ks, agent (scores block), windows [{k, window (scores block),
                      agent_minus_window (scores block), train_r2_pooled, n_inputs}],
                      history_worth {global, tokens_2, tokens_actions_2: {window_reaches_agent_at_k,
                      agent_not_above_window_at_k}} (None: no window up to K does), regressor,
                      seed, stream
    layers            [{name: embed | block_1.. | final_norm, n_features, r2_pooled,
                      within_branch_r2_pooled}]
    training          {n_episodes, data, checkpoints [{env_steps, checkpoint, r2_pooled,
                      within_branch_r2_pooled}], figure} or {checkpoints: [], skipped}
    return_per_step, solver_values, fraction_of_belief_mdp, learning_curve_references,
    analysis_wall_time_s
    action_branching  what the tokens_actions_2 bins are and did (controls.action_branching):
                      n_bins_per_action_coordinate, bins_used_per_coordinate, n_branches
                      {tokens_2, tokens_actions_2}, branches_added_by_actions, held_out
                      {n_steps, min_members, <branching>: {n_branches, branches_with_min_members,
                      steps_in_branches_with_min_members}}
    controls_by_data  every control also on data the agent did not choose (controls.py: its
                      docstring has the schema): agent_greedy, belief_mdp, random blocks
    interventions     (leaves that run them) the headline of interventions.json: {file,
                      <layer>: {<counterfactual>: {agent, agent_random, untrained,
                      agent_correlation}}}, fractions of the optimal action shift

interventions.json (schema_version 1; `run_interventions`, also written for a finished run by
`python -m experiments.mess3_belief_geometry.interventions RESULTS_RUN_DIR`): recipe,
checkpoint, seed, sizes, what the target, counterfactuals, shifts and controls are (sentences),
report (rl_harness.analysis.InterventionReport.to_dict(): modules {agent, control} -> layer ->
{probe_r2_pooled, probe_rank, edits {corners, other_steps} -> {belief, random_orthogonal:
{correlation, cosine, fraction, policy_shift_rms, optimal_shift_rms}, belief_minus_random,
edit_norm_mean, representation_norm_mean, probe_miss_rms, value_shift_mean}}, differences
{agent_minus_control}), figure (interventions.png), figure_points, wall_time_s.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec

from rl_harness import CheckpointSchedule, RunContext, RunResult, write_json
from rl_harness.analysis import (
    Rollouts,
    RunArtifacts,
    belief_interventions,
    collect_rollouts,
    compare_with_windows,
    corner_beliefs,
    evaluate_probe,
    held_out_scores,
    info_target,
    load_module,
    other_step_beliefs,
    paired_difference,
    plot_action_shifts,
    plot_belief_simplex,
    plot_probe_over_training,
    probe_checkpoints,
    probe_layers,
    replay_rollouts,
    rllib_action_transform,
    run_checkpoints,
)
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.seeding import stream_rng, stream_seed

# The task (explicit: this is the science).
ALPHA = 0.85  # MESS3 emission: a state emits its own token with probability alpha
W_MAX = 5.0  # tilt bound: actions are clipped to [-W_MAX, W_MAX]^2
BETA = 4.0  # KL inverse temperature: reward pays KL / BETA for steering
OCCUPANCY_STATES = (2,)  # paid 1 per step spent here (the rare state: stationary 0.10)
DELAY = 1  # tokens are seen one step late
EPISODE_LENGTH = 1024
MODEL = "rl_harness.envs.mess3:control_chain_model"
TASK = "rl_harness.envs.mess3.tasks:OccupancyControlTask"

# The probe.
BRANCH_K = 2  # within-branch R²: steps grouped by their last 2 visible tokens (as stack-2)
ACTION_BINS = 3  # action-conditioned branches: each action coordinate in 3 quantile bins
TOKEN_BRANCHES = "tokens_2"  # the branching names in probe_metrics.json
ACTION_BRANCHES = "tokens_actions_2"
PROBE_SCHEMA_VERSION = 2  # probe_metrics.json; 2: controls on the agent's data, windows, nulls
PROBE_RIDGE = 1e-6
# The analysis steps 64 episodes one token at a time: two intra-op threads buy little on such
# small ops, and on shared cores their spin-waits cost far more (2026-12-04, 2 cores at load
# average ~13, interleaved rounds in one process: 29 ms per 64-env step of the study's
# transformer on 1 thread, 702 ms on 2).
ANALYSIS_TORCH_THREADS = 1
PROBE_TEST_FRACTION = 0.25
BELIEF_NAMES = ["decision_belief_0", "decision_belief_1", "decision_belief_2"]

# The interventions (issue 30): edit the residual where the belief probe reads it, score the
# action shift against the belief-MDP policy's (analysis.belief_interventions).
# interventions.json; 2: pre-clip shifts and clipped fractions beside the post-clip scores.
INTERVENTIONS_SCHEMA_VERSION = 2
INTERVENTION_LAYERS = ("block_2", "final_norm")  # the middle block; what the heads read
INTERVENTIONS_FILE, INTERVENTIONS_FIGURE = "interventions.json", "interventions.png"

# The learning curve.
RETURN_KEY = "env_runners/episode_return_mean"
LENGTH_KEY = "env_runners/episode_len_mean"
STEPS_KEY = "num_env_steps_sampled_lifetime"
# Solver key -> label of its reference line (the order they are drawn in).
REFERENCES = {
    "oracle": "oracle (state known)",
    "belief_mdp": "belief-MDP ceiling",
    "stack_3": "best stack-3 found",
    "stack_2": "best stack-2",
    "memoryless": "best memoryless",
}


class ProbeBudget(Protocol):
    """The part of a leaf's Budget the analysis reads (the leaf's Budget is a dataclass)."""

    train_batch: int  # env steps per iteration (the first log-spaced checkpoint)
    probe_episodes: int  # episodes rolled out per policy (a quarter held out for the probe)
    warmup_steps: int  # played before recording, so the agent's context has filled
    probe_steps: int  # recorded steps per episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval
    n_permutations: int  # refits for each permutation null (global and within-branch)
    window_k_max: int  # window baselines k = 1..window_k_max
    training_probe_episodes: int  # greedy episodes replayed through each checkpoint
    intervention_episodes: int  # the first greedy episodes the interventions use (probes
    # fitted on 3/4 of them, edits on the held-out 1/4)
    intervention_steps: int  # their first recorded steps (after the warm-up) that are edited


def env_config(
    info: Sequence[str],
    *,
    decision_belief_in_observation: bool = False,
    random_first_episode_length: bool = True,
) -> dict[str, Any]:
    """The occupancy-control env (`rl_harness.envs.hmm.ENV_ID`).

    Observation: the newest visible token (one-hot, one step late) and the previous executed
    action (scaled to [0, 1]); with `decision_belief_in_observation`, also the decision
    belief (the belief_observation control). `random_first_episode_length` spreads episode
    ends over the vectorized copies during training; rollouts for analysis turn it off.
    """
    config: dict[str, Any] = {
        "model": MODEL,
        "model_kwargs": {"alpha": ALPHA},
        "task": TASK,
        "task_kwargs": {
            "w_max": W_MAX,
            "beta": BETA,
            "occupancy_states": list(OCCUPANCY_STATES),
        },
        "observation_delay": DELAY,
        "episode_length": EPISODE_LENGTH,
        "random_first_episode_length": random_first_episode_length,
        "token_window": 1,
        "action_window": 1,
        "info": list(info),
    }
    if decision_belief_in_observation:
        config["include_decision_belief"] = True
    return config


# ---------------------------------------------------------------------------- solver values


def solver_values(cache: bool | str | Path = True) -> dict[str, Any]:
    """Long-run reward per step of each reference policy at this study's parameters.

    From `rl_harness.envs.mess3.solvers` (cached on disk there, so only the first call pays
    for the solve). Keys: oracle, belief_mdp (belief_vi at DELAY), stack_3, stack_2,
    memoryless (reactive), `converged` (each solver's flag), `source`. stack_2 and memoryless
    are global optima (exhaustive scans of the corner tables, then polish); stack_3 is the
    best table the solver's search found, not proven global (4**27 corner tables cannot be
    scanned), so it is labelled "best stack-3 found". If the solvers are not installed the
    values are None and `source` says why, so a run still completes and says what it lacks.
    """
    try:
        from rl_harness.envs.mess3 import solvers
    except ImportError as error:
        return {key: None for key in REFERENCES} | {
            "source": f"unavailable: rl_harness.envs.mess3.solvers ({error})"
        }
    problem = solvers.OccupancyProblem(ALPHA, W_MAX, BETA, OCCUPANCY_STATES)
    solutions = {
        "oracle": solvers.solve_oracle(problem, cache=cache),
        "belief_mdp": solvers.solve_belief_vi(problem, DELAY, cache=cache),
        "stack_3": solvers.solve_stack(problem, DELAY, 3, cache=cache),
        "stack_2": solvers.solve_stack(problem, DELAY, 2, cache=cache),
        "memoryless": solvers.solve_reactive(problem, DELAY, cache=cache),
    }
    values = {key: solution.value for key, solution in solutions.items()}
    return values | {
        "converged": {key: bool(solution.converged) for key, solution in solutions.items()},
        "source": "rl_harness.envs.mess3.solvers",
        "problem": problem.settings() | {"delay": DELAY},
    }


def references_from(values: Mapping[str, Any]) -> dict[str, float]:
    """{line label: value} for the solver values that exist, in REFERENCES order."""
    return {
        label: float(values[key])
        for key, label in REFERENCES.items()
        if values.get(key) is not None
    }


# ---------------------------------------------------------------------------- learning curve


def return_per_step_curve(rows: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(env steps, mean episode return / mean episode length) from metrics.jsonl rows."""
    points = [
        (row[STEPS_KEY], row[RETURN_KEY] / row[LENGTH_KEY])
        for row in rows
        if row.get(STEPS_KEY) is not None
        and row.get(RETURN_KEY) is not None
        and row.get(LENGTH_KEY)
    ]
    array = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    return array[:, 0], array[:, 1]


def plot_return_per_step(
    path: Path,
    rows: Sequence[Mapping[str, Any]],
    references: Mapping[str, float],
    *,
    title: str,
    evaluations: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """learning_curve.png: training return per step against env steps, with each reference
    as a dashed line (and the final evaluations as markers). Returns {label: y} of every
    horizontal line as read back from the drawn figure, so callers can check what it shows.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, values = return_per_step_curve(rows)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    if steps.size:
        ax.plot(steps, values, marker="o", ms=3, lw=1.2, color="C0", label="training (sampled)")
    else:
        ax.text(0.5, 0.5, "no episode finished yet", ha="center", transform=ax.transAxes)
    for index, (label, value) in enumerate(references.items()):
        ax.axhline(value, ls="--", lw=1, color=f"C{index + 1}", label=label)
    # The final evaluations sit at the last env-step count, finished episodes or not.
    counts = [row[STEPS_KEY] for row in rows if row.get(STEPS_KEY) is not None]
    last = float(max(counts)) if counts else 0.0
    for index, (label, value) in enumerate((evaluations or {}).items()):
        ax.plot([last], [value], marker="s^"[index % 2], ls="none", color="k", label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("return per step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    ax.set_title(title, fontsize="medium")
    drawn = {
        str(line.get_label()): float(line.get_ydata()[0])
        for line in ax.get_lines()
        if str(line.get_label()) in references
    }
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


# ---------------------------------------------------------------------------- analysis


def checkpoint_schedule(plan: ProbeBudget) -> CheckpointSchedule:
    """Step 0, then the first iteration past each doubling of env steps from one batch:
    the probe-over-training points (`analyze` replays the final agent's rollouts through
    each)."""
    return CheckpointSchedule(
        at_start=True, log_base=2.0, log_unit="env_steps", log_first=float(plan.train_batch)
    )


def probe_env_factory(decision_belief_in_observation: bool):
    """The analysis' env factory (num_envs -> HMMVectorEnv): decision beliefs in info,
    every episode EPISODE_LENGTH long."""
    config = env_config(
        ["decision_belief"],
        decision_belief_in_observation=decision_belief_in_observation,
        random_first_episode_length=False,
    )
    return functools.partial(HMMVectorEnv, env_config=config)


def rollout_settings(plan: ProbeBudget, seed: int, make_env: Any, action_space: Any) -> dict:
    """collect_rollouts' settings for every analysis rollout but the sizes (n_episodes,
    episode_steps): the same seeds, warm-up, targets, batching and action transform, so
    the first episodes and steps of two collections with different sizes agree."""
    return {
        "make_env": make_env,
        "warmup_steps": plan.warmup_steps,
        "seed": seed,
        "target": info_target("decision_belief"),
        "num_envs": min(plan.probe_episodes, 64),
        # RLlib's default Box handling: the module acts in [-1, 1], the env gets the box.
        "action_transform": rllib_action_transform(action_space),
    }


def untrained_module(spec: RLModuleSpec, make_env: Any, seed: int) -> RLModule:
    """The same architecture with fresh, seeded weights: a control for the probe."""
    env = make_env(1)
    spec = dataclasses.replace(
        spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def _first_episodes(rollouts: Rollouts, n: int) -> Rollouts:
    """The first n episodes of `rollouts` (all arrays cut alike)."""
    cut = {
        field.name: getattr(rollouts, field.name)[:n]
        for field in dataclasses.fields(rollouts)
        if isinstance(getattr(rollouts, field.name), np.ndarray)
    }
    return dataclasses.replace(rollouts, **cut)


def _value(report: Mapping[str, Any] | None, *path: str) -> float | None:
    for key in path:
        report = report.get(key) if isinstance(report, Mapping) else None
    return report.get("value") if isinstance(report, Mapping) else None


def _progress(label: str, started: float):
    def say(message: str) -> None:
        print(f"[analysis {label} {time.perf_counter() - started:6.1f}s] {message}", flush=True)

    return say


def analyze(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    plan: ProbeBudget,
    aux_weight: float = 0.0,
    decision_belief_in_observation: bool = False,
    interventions: bool = False,
) -> dict[str, Any]:
    """Evaluate and probe this run's trained agent; write probe_metrics.json,
    solver_values.json, belief_simplex.png, learning_curve.png and (with >= 2 checkpoints)
    r2_over_training.png into the results folder. Prints a progress line per stage.

    `module_spec` is the leaf's (for the untrained control), `plan` its Budget (recorded
    whole); `decision_belief_in_observation` must match the leaf's env. With `interventions`,
    also the causal belief interventions (`run_interventions`: interventions.json and
    interventions.png). Torch runs on ANALYSIS_TORCH_THREADS intra-op threads meanwhile
    (restored after).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(ANALYSIS_TORCH_THREADS)
    try:
        return _analyze(
            context,
            label=label,
            module_spec=module_spec,
            plan=plan,
            aux_weight=aux_weight,
            decision_belief_in_observation=decision_belief_in_observation,
            interventions=interventions,
        )
    finally:
        torch.set_num_threads(before)


def _analyze(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    plan: ProbeBudget,
    aux_weight: float,
    decision_belief_in_observation: bool,
    interventions: bool,
) -> dict[str, Any]:
    from experiments.mess3_belief_geometry import controls  # imports this module

    started = time.perf_counter()
    say = _progress(label, started)
    run = RunArtifacts.open(context.results_dir)
    checkpoint = run.final_checkpoint()
    module = load_module(checkpoint)  # module only: no env runners, no learner
    make_env = probe_env_factory(decision_belief_in_observation)
    probe_env = make_env(1)
    layout, action_space = probe_env.layout, probe_env.single_action_space
    probe_env.close()
    collect = functools.partial(
        collect_rollouts,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        **rollout_settings(plan, context.seed, make_env, action_space),
    )
    size = f"{plan.probe_episodes} episodes x ({plan.warmup_steps} + {plan.probe_steps}) steps"
    say(f"greedy rollouts of the trained agent ({size})")
    greedy = collect(module, policy="greedy")
    say(f"sampled rollouts ({size})")
    sampled = collect(module, policy="sample")
    say("untrained control: replaying the agent's greedy rollouts through it")
    control = untrained_module(
        module_spec, make_env, stream_seed(context.seed, "study", "untrained")
    )
    untrained_features = replay_rollouts(control, greedy)

    tokens = greedy.observations[..., layout.tokens]

    def probe(features: np.ndarray, permutations: int = 0) -> Any:
        return evaluate_probe(
            features,
            greedy.targets,
            seed=context.seed,
            ridge=PROBE_RIDGE,
            test_fraction=PROBE_TEST_FRACTION,
            n_bootstrap=plan.n_bootstrap,
            target_names=BELIEF_NAMES,
            branch_tokens=tokens,
            branch_k=BRANCH_K,
            n_permutations=permutations,
            n_within_permutations=permutations,
        )

    say(f"affine probes: agent (with {plan.n_permutations} permutations of each null), controls")
    agent = probe(greedy.representations, plan.n_permutations)
    observation = probe(greedy.observations)
    untrained = probe(untrained_features)
    # Branches: the last BRANCH_K visible tokens, and those plus the binned last BRANCH_K
    # executed actions (the observation's previous-action part, ACTION_BINS equal-frequency
    # bins per coordinate from the agent probe's train episodes: controls.action_branching).
    branching = controls.action_branching(
        tokens, greedy.observations[..., layout.actions], agent.train_episodes, agent.test_episodes
    )
    branchings = branching.labels
    # Every score below is on the agent's held-out steps and its bootstrap resamples.
    test = agent.test_episodes
    held_out = greedy.targets[test]
    within = {name: labels[test] for name, labels in branchings.items()}
    excluded = set(agent.report.r2_pooled_excludes)
    common = dict(
        weights=agent.bootstrap_weights,
        branchings=within,
        confidence=agent.report.confidence,
        include=np.array([name not in excluded for name in BELIEF_NAMES]),
    )
    predictions = {
        "agent": agent.test_predictions,
        "untrained_module": untrained.test_predictions,
        "observation": observation.test_predictions,
    }
    scores = {name: held_out_scores(held_out, pred, **common) for name, pred in predictions.items()}

    ks = list(range(1, plan.window_k_max + 1))
    say(f"window baselines k = {ks[0]}..{ks[-1]} (MLP on the last k tokens and actions)")
    window_parts = np.r_[layout.tokens, layout.actions]  # never the belief itself
    windows = compare_with_windows(
        agent,
        greedy.observations[..., window_parts],
        greedy.targets,
        ks=ks,
        seed=context.seed,
        history=greedy.warmup_observations[..., window_parts],
        branchings=branchings,
        progress=say,
    )
    # The best window: the highest within-branch R² (chosen on the held-out steps, which can
    # only flatter the window, never the agent).
    best = max(
        windows.rows,
        key=lambda row: _value(row.window.to_dict(), "within_branch", TOKEN_BRANCHES) or -np.inf,
    )
    differences = {
        "agent_minus_untrained_module": paired_difference(
            held_out, agent.test_predictions, untrained.test_predictions, **common
        ),
        "agent_minus_observation": paired_difference(
            held_out, agent.test_predictions, observation.test_predictions, **common
        ),
        "agent_minus_best_window": best.agent_minus_window,
    }

    say("per-layer probes: replaying the agent's rollouts, every residual")
    layers = probe_layers(
        module,
        greedy,
        seed=context.seed,
        ridge=PROBE_RIDGE,
        test_fraction=PROBE_TEST_FRACTION,
        n_bootstrap=plan.n_bootstrap,
        target_names=BELIEF_NAMES,
        branch_tokens=tokens,
        branch_k=BRANCH_K,
        progress=say,
    )

    training = _probe_over_training(context, run, greedy, tokens, plan, label, say)

    say("controls on data the agent did not choose (belief-MDP and random actions)")
    by_data = controls.controls_by_data(
        module, control, make_env=make_env, plan=plan, seed=context.seed, greedy=greedy, say=say
    )

    values = solver_values()
    write_json(context.results_dir / "solver_values.json", values)
    rows = run.metrics()
    final = rows[-1] if rows else {}
    steps, curve = return_per_step_curve(rows)
    returns = {
        "sampled": sampled.mean_reward_per_step(),
        "greedy": greedy.mean_reward_per_step(),
        "training_last": float(curve[-1]) if curve.size else None,
    }
    ceiling = values.get("belief_mdp")
    record = {
        "schema_version": PROBE_SCHEMA_VERSION,
        "recipe": label,
        "task": {
            "model": MODEL,
            "alpha": ALPHA,
            "task": TASK,
            "w_max": W_MAX,
            "beta": BETA,
            "occupancy_states": list(OCCUPANCY_STATES),
            "observation_delay": DELAY,
            "episode_length": EPISODE_LENGTH,
            "decision_belief_in_observation": decision_belief_in_observation,
        },
        "aux_weight": aux_weight,
        "budget": dataclasses.asdict(plan),  # the leaf's Budget dataclass
        "checkpoint": str(checkpoint),
        "env_steps": final.get(STEPS_KEY),
        "training_iterations": final.get("training_iteration"),
        "representation": "the module's encode_step after reading each step (context: the "
        "carried state): the final normed residual stream",
        "target": "info['decision_belief']: P(state now | tokens seen, own executed actions)",
        "n_episodes": greedy.n_episodes,
        "branch_k": BRANCH_K,
        "branchings": {
            TOKEN_BRANCHES: f"equal last {BRANCH_K} visible tokens",
            ACTION_BRANCHES: f"equal last {BRANCH_K} visible tokens and executed actions, each "
            f"action coordinate in {ACTION_BINS} equal-frequency bins (mid-rank among the probe's "
            "train episodes; ties share a bin)",
        },
        "action_branching": branching.record,
        "probe": agent.report.to_dict(),
        "controls": {
            "data": "every control is scored on the agent's greedy rollouts: the untrained "
            "module replays the agent's observations; same targets, branches, split, resamples",
            "untrained_module_probe": untrained.report.to_dict(),
            "observation_probe": observation.report.to_dict(),
        },
        "scores": {name: value.to_dict() for name, value in scores.items()},
        "differences": {name: value.to_dict() for name, value in differences.items()}
        | {"best_window_k": best.k},
        "windows": windows.to_dict(),
        "layers": layers.table(),
        "training": training,
        controls.KEY: by_data,
        "return_per_step": returns,
        "solver_values": values,
        "fraction_of_belief_mdp": (
            {k: v / ceiling for k, v in returns.items() if v is not None} if ceiling else None
        ),
    }
    if interventions:
        record["interventions"] = run_interventions(
            context.results_dir,
            label=label,
            module=module,
            control=control,
            rollouts=intervention_rollouts(greedy, plan),
            plan=plan,
            seed=context.seed,
            checkpoint=checkpoint,
            say=say,
        )
    # The memory yardstick and its baselines (yardstick.py, issue 37): yardstick.json.
    from experiments.mess3_belief_geometry import yardstick  # here: it imports this module

    say("memory yardstick and baselines (yardstick.json)")
    record["yardstick"] = yardstick.headline(
        yardstick.measure(
            context.results_dir,
            plan=plan,
            seed=context.seed,
            label=label,
            module=module,
            decision_belief_in_observation=decision_belief_in_observation,
            greedy=greedy,
            say=say,
        )
    )
    r2 = agent.report.r2_pooled
    r2_text = f"{r2.value:.3f} [{r2.low:.3f}, {r2.high:.3f}]" if r2 else "undefined"
    plot_belief_simplex(
        context.results_dir / "belief_simplex.png",
        greedy.targets[agent.test_episodes].reshape(-1, 3),
        agent.test_predictions.reshape(-1, 3),
        title=f"{label}: held-out episodes, probe R² {r2_text}",
        labels=("decision belief (from env info)", "affine probe of the representation"),
    )
    record["learning_curve_references"] = plot_return_per_step(
        context.results_dir / "learning_curve.png",
        rows,
        references_from(values),
        title=f"{label}: occupancy control (beta {BETA}, w_max {W_MAX}, delay {DELAY})",
        evaluations={"final greedy": returns["greedy"], "final sampled": returns["sampled"]},
    )
    record["analysis_wall_time_s"] = round(time.perf_counter() - started, 3)
    write_json(context.results_dir / "probe_metrics.json", record)
    say(f"wrote probe_metrics.json ({record['analysis_wall_time_s']:.0f} s)")
    return record


def _probe_over_training(
    context: RunContext,
    run: RunArtifacts,
    greedy: Rollouts,
    tokens: np.ndarray,
    plan: ProbeBudget,
    label: str,
    say: Any,
) -> dict[str, Any]:
    """R² against env steps: the first `plan.training_probe_episodes` of the agent's greedy
    rollouts replayed through each saved checkpoint (run_checkpoints), one split for all."""
    pairs = [
        (c.env_steps, c.path)
        for c in run_checkpoints(run)
        if c.env_steps is not None and isinstance(c.path, Path)
    ]
    pairs = sorted({steps: path for steps, path in pairs}.items())  # one per env-step count
    if len(pairs) < 2:
        return {"checkpoints": [], "skipped": f"{len(pairs)} local checkpoint(s) with env steps"}
    n = min(plan.training_probe_episodes, greedy.n_episodes)
    subset = _first_episodes(greedy, n)
    say(f"probes over training: {len(pairs)} checkpoints, {n} episodes replayed through each")
    probes = probe_checkpoints(
        pairs,
        subset,
        seed=context.seed,  # the agent probe's stream: with every episode, its split
        ridge=PROBE_RIDGE,
        test_fraction=PROBE_TEST_FRACTION,
        n_bootstrap=plan.n_bootstrap,
        target_names=BELIEF_NAMES,
        branch_tokens=tokens[:n],
        branch_k=BRANCH_K,
        progress=say,
    )
    plot_probe_over_training(
        context.results_dir / "r2_over_training.png",
        probes,
        title=f"{label}: decision-belief probe over training ({n} greedy episodes of the "
        "final agent, replayed)",
    )
    return {
        "n_episodes": n,
        "data": "the final agent's first greedy episodes, replayed through each checkpoint",
        "checkpoints": [p.to_dict() for p in probes],
        "figure": "r2_over_training.png",
    }


def intervention_rollouts(rollouts: Rollouts, plan: ProbeBudget) -> Rollouts:
    """The first `plan.intervention_episodes` episodes and `plan.intervention_steps`
    recorded steps of `rollouts` (their warm-up kept whole): what the interventions use."""
    n, steps = plan.intervention_episodes, plan.intervention_steps
    if n > rollouts.n_episodes or steps > rollouts.episode_steps:
        raise ValueError(
            f"the interventions use {n} episodes x {steps} steps; the rollouts hold "
            f"{rollouts.n_episodes} x {rollouts.episode_steps}"
        )
    stepped = ("observations", "representations", "targets", "actions", "rewards")
    cut = {name: getattr(rollouts, name)[:n, :steps] for name in stepped}
    cut |= {name: getattr(rollouts, name)[:n] for name in ("episode_ids", "episode_seeds")}
    if rollouts.warmup_observations is not None:
        cut["warmup_observations"] = rollouts.warmup_observations[:n]
    return dataclasses.replace(rollouts, **cut)


def belief_mdp_policy(cache: bool | str | Path = True) -> Any:
    """The belief MDP's optimal policy at this study's parameters (decision beliefs (n, 3)
    -> executed actions (n, 2)): the same solve as `solver_values`' belief_mdp (cached)."""
    from rl_harness.envs.mess3 import solvers

    problem = solvers.OccupancyProblem(ALPHA, W_MAX, BETA, OCCUPANCY_STATES)
    return solvers.solve_belief_vi(problem, DELAY, cache=cache).policy


def run_interventions(
    results_dir: Path,
    *,
    label: str,
    module: RLModule,
    control: RLModule,
    rollouts: Rollouts,
    plan: ProbeBudget,
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
    (`optimal_policy`, default `belief_mdp_policy()`), beside a random edit of the same
    length orthogonal to the probe and the same edit of the untrained module.
    """
    started = time.perf_counter()
    if optimal_policy is None:
        try:
            optimal_policy = belief_mdp_policy()
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
        ridge=PROBE_RIDGE,
        test_fraction=PROBE_TEST_FRACTION,
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
        f"{DELAY}) at b' minus at b, in env units",
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
                "agent": _value(agent["belief"], "fraction"),
                "agent_random": _value(agent["random_orthogonal"], "fraction"),
                "untrained": None if control is None else _value(control["belief"], "fraction"),
                "agent_correlation": _value(agent["belief"], "correlation"),
                "agent_pre_clip": _value((agent.get("pre_clip") or {}).get("belief"), "fraction"),
                "agent_clipped_fraction": (agent.get("clipped_fraction") or {}).get("belief"),
            }
    return out


def _controls_headline(record: Mapping[str, Any]) -> dict[str, Any]:
    """result.json's `controls_by_data` and `action_branches_added` (when the record has them)."""
    from experiments.mess3_belief_geometry import controls  # imports this module

    out: dict[str, Any] = {}
    if "action_branching" in record:
        out["action_branches_added"] = record["action_branching"]["branches_added_by_actions"]
    if controls.KEY in record:
        out[controls.KEY] = controls.headline(record[controls.KEY])
    return out


def summary(result: RunResult, record: dict[str, Any]) -> dict[str, Any]:
    """The compact result a leaf's run() returns (the harness stores it as result.json)."""
    controls = record["controls"]
    scores, differences = record["scores"], record["differences"]
    agent_within = record["probe"].get("within_branch") or {}
    windows = record["windows"]
    training = record["training"]["checkpoints"]
    return {
        **_controls_headline(record),  # controls_by_data, action_branches_added
        "iterations": result.iterations,
        "env_steps": record["env_steps"],
        "return_per_step": record["return_per_step"],
        "solver_values": {key: record["solver_values"].get(key) for key in REFERENCES},
        "fraction_of_belief_mdp": record["fraction_of_belief_mdp"],
        "probe_r2": _value(record["probe"], "r2_pooled"),
        "probe_r2_within_branch": _value(record["probe"], "within_branch", "r2_pooled"),
        "probe_r2_within_action_branch": _value(scores["agent"], "within_branch", ACTION_BRANCHES),
        "untrained_r2": _value(controls["untrained_module_probe"], "r2_pooled"),
        "untrained_r2_within_branch": _value(
            controls["untrained_module_probe"], "within_branch", "r2_pooled"
        ),
        "observation_r2": _value(controls["observation_probe"], "r2_pooled"),
        "observation_r2_within_branch": _value(
            controls["observation_probe"], "within_branch", "r2_pooled"
        ),
        "agent_minus_untrained_within_branch": _value(
            differences["agent_minus_untrained_module"], "within_branch", TOKEN_BRANCHES
        ),
        "agent_minus_best_window_within_branch": _value(
            differences["agent_minus_best_window"], "within_branch", TOKEN_BRANCHES
        ),
        "agent_minus_best_window_within_action_branch": _value(
            differences["agent_minus_best_window"], "within_branch", ACTION_BRANCHES
        ),
        "best_window_k": differences["best_window_k"],
        "window_r2": {
            f"k{row['k']}": _value(row["window"], "r2_pooled") for row in windows["windows"]
        },
        "window_r2_within_branch": {
            f"k{row['k']}": _value(row["window"], "within_branch", TOKEN_BRANCHES)
            for row in windows["windows"]
        },
        "window_reaches_agent_within_branch_at_k": windows["history_worth"][TOKEN_BRANCHES][
            "window_reaches_agent_at_k"
        ],
        "layer_r2_within_branch": {
            row["name"]: (row["within_branch_r2_pooled"] or {}).get("value")
            for row in record["layers"]
        },
        "permutation_p_value": (record["probe"].get("permutation") or {}).get("p_value"),
        "within_branch_permutation_p_value": (agent_within.get("permutation") or {}).get("p_value"),
        "p_value_floor": (record["probe"].get("permutation") or {}).get("p_value_floor"),
        "r2_at_first_checkpoint": _value(training[0], "r2_pooled") if training else None,
        "analysis_wall_time_s": record["analysis_wall_time_s"],
    } | ({"interventions": record["interventions"]} if "interventions" in record else {})

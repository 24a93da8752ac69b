"""MESS3 occupancy control: the in-run analysis of a trained agent (`analyze`) and what a
leaf's run() returns (`summary`).

`analyze`: return per step under sampled and greedy actions, and an affine probe of the
agent's representation for the decision belief on its greedy rollouts, set against
everything that could explain it without memory, all on the agent's own held-out steps
(same targets, branches, train/test split and bootstrap resamples): an untrained module of
the same architecture (replayed on the agent's observations), the raw observation, and
window baselines (an MLP on the last k visible tokens and executed actions, k =
1..window_k_max); within branches of equal last BRANCH_K tokens and of equal tokens and
binned actions; permutation nulls (global, and conditional within branches); paired
bootstrap differences; every block's residual; R² over training from the run's
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
    incremental_r2    memory beyond a window (incremental.py: its docstring has the schema):
                      per k, R² of the window alone, with the agent's and with the untrained
                      module's read-out, b - a and b - c with intervals and Holm p
    incremental_r2_sampled  the same test on the agent's sampled rollouts (its own probe and
                      action branches there; the untrained module replays them)
    layers            [{name: embed | block_1.. | final_norm, n_features, r2_pooled,
                      within_branch_r2_pooled}]
    training          {n_episodes, data, checkpoints [{env_steps, checkpoint, r2_pooled,
                      within_branch_r2_pooled}], figure} or {checkpoints: [], skipped}
    return_per_step, solver_values, fraction_of_belief_mdp, learning_curve_references,
    analysis_wall_time_s (= timings.total_s)
    timings           {stages_s: {stage: seconds}, in order (STAGES), total_s, torch_threads,
                      stages: {stage: what it does}}; result.json: analysis_timings (stages_s)
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

The analysis runs in stages (STAGES), each announced on the console when it starts and
when it ends (with its seconds). Every data set is collected once, all its episodes stepped
as one batch (greedy, sampled, belief-MDP- and random-driven), every replay done once (the
untrained control on each data set, the agent's residuals on its greedy rollouts), and each
later stage reads them: the controls, the yardstick and the interventions collect none of
their own. The controls on the agent's greedy data are computed once (one call of the
library's `score_controls`, reading the agent probe with its nulls): the `controls`,
`scores`, `differences`, `windows` and `action_branching` blocks and
`controls_by_data.agent_greedy` are views of that one result. The modules below this one
(task, spec, probing, controls, incremental, yardstick, interventions) never import it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from experiments.mess3_belief_geometry import (
    controls,
    incremental,
    probing,
    task,
    window_capacity,
    yardstick,
)
from experiments.mess3_belief_geometry.interventions import intervention_rollouts, run_interventions
from experiments.mess3_belief_geometry.spec import Budget
from rl_harness import (
    ENV_STEPS_KEY,
    ITERATION_KEY,
    LENGTH_KEY,
    RETURN_KEY,
    CheckpointSchedule,
    Results,
    RunContext,
    write_json,
)
from rl_harness.analysis import (
    AnalysisStage,
    FitMemo,
    Rollouts,
    RunArtifacts,
    collect_rollouts,
    evaluate_probe,
    load_module,
    plot_belief_simplex,
    plot_probe_over_training,
    probe_checkpoints,
    replay_rollouts,
    replay_rollouts_named,
    run_checkpoints,
)
from rl_harness.analysis.layer_probes import probe_named
from rl_harness.seeding import stream_seed

PROBE_SCHEMA_VERSION = 2  # probe_metrics.json; 2: controls on the agent's data, windows, nulls

# The learning curve.
STEPS_KEY = ENV_STEPS_KEY
# The analysis' stages in order (probe_metrics.json `timings`: seconds of each).
STAGES = {
    "load": "the final checkpoint's module and the untrained control built",
    "rollouts": "greedy, sampled, belief-MDP- and random-driven rollouts, all episodes of "
    "each stepped as one batch",
    "replays": "the untrained control replayed on every data set, the agent's residuals on "
    "its greedy rollouts (each once, read by every later stage)",
    "probes": "the agent probe with its permutation nulls",
    "controls": "every control on the agent's greedy data (score_controls, once): the untrained "
    "and observation probes, window MLPs on the last k tokens and actions and on tokens only",
    "incremental_r2": "memory beyond a window: window MLPs alone, with the agent's and with the "
    "untrained module's read-out",
    "incremental_r2_sampled": "the same on the agent's sampled rollouts (the untrained module "
    "replayed on them)",
    "layers": "a probe of every residual",
    "over_training": "checkpoints loaded, the first greedy episodes replayed through each",
    "controls_by_data": "every control on the belief-MDP and random data",
    "interventions": "belief edits (interventions.json)",
    "yardstick": "memory yardstick (yardstick.json)",
    "figures": "belief_simplex.png and learning_curve.png",
}
# The stages that step a module one step at a time (acting; edited steps): many tiny ops,
# on probing.ANALYSIS_TORCH_THREADS; the others on the run's own threads (StageClock).
STEPPING = ("rollouts", "interventions")


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


def checkpoint_schedule(plan: Budget) -> CheckpointSchedule:
    """Step 0, then the first iteration past each doubling of env steps from one batch:
    the probe-over-training points (`analyze` replays the final agent's rollouts through
    each)."""
    return CheckpointSchedule(
        at_start=True, log_base=2.0, log_unit="env_steps", log_first=float(plan.train_batch)
    )


class StageClock:
    """The analysis' stages, timed: one console line when each starts and one when it ends
    (with its seconds), `say` for lines within a stage; `seconds` {stage: s} in order.

    Torch threads per stage: the stages that step a module one step at a time (STEPPING:
    many tiny ops) on probing.ANALYSIS_TORCH_THREADS, every other stage (fits, replays many
    steps per call: large matrix products) on the run's own `threads` (what the process had
    when the analysis began: the run's hardware plan or OMP_NUM_THREADS)."""

    def __init__(self, label: str, threads: int) -> None:
        self.label = label
        self.threads = threads
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def say(self, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        print(f"[analysis {self.label} {elapsed:6.1f}s] {message}", flush=True)

    @contextlib.contextmanager
    def stage(self, name: str, what: str) -> Iterator[None]:
        threads = probing.ANALYSIS_TORCH_THREADS if name in STEPPING else self.threads
        self.say(f"stage {name} ({what})")
        began = time.perf_counter()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(self.threads)
            self.seconds[name] = round(time.perf_counter() - began, 3)
        self.say(f"stage {name} done in {self.seconds[name]:.1f} s")

    def record(self) -> dict[str, Any]:
        """probe_metrics.json's `timings`: seconds per stage, their total and the threads."""
        return {
            "stages_s": dict(self.seconds),
            "total_s": round(time.perf_counter() - self.started, 3),
            "torch_threads": {
                "stepping": probing.ANALYSIS_TORCH_THREADS,
                "other": self.threads,
                "stepping_stages": [name for name in self.seconds if name in STEPPING],
            },
            "stages": {name: STAGES.get(name, name) for name in self.seconds},
        }


def untrained_seed(seed: int, init: int) -> int:
    """The seed of untrained initialisation `init` of a run of root `seed`: init 0 is the
    control every stage uses (the stream it always had), init j >= 1 `(..., "untrained", j)`."""
    names = ("study", "untrained") if init == 0 else ("study", "untrained", str(init))
    return stream_seed(seed, *names)


def untrained_controls(module_spec: RLModuleSpec, make_env: Any, seed: int, plan: Budget) -> list:
    """The plan's `untrained_inits` untrained modules of the leaf's architecture, in order."""
    if plan.untrained_inits < 1:
        raise ValueError(f"untrained_inits must be >= 1, got {plan.untrained_inits}")
    return [
        probing.untrained_module(module_spec, make_env, untrained_seed(seed, init))
        for init in range(plan.untrained_inits)
    ]


def analyze(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    plan: Budget,
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
    interventions.png). Torch threads per stage: `StageClock` (restored after).
    """
    threads = torch.get_num_threads()
    try:
        return _analyze(
            context,
            label=label,
            module_spec=module_spec,
            plan=plan,
            aux_weight=aux_weight,
            decision_belief_in_observation=decision_belief_in_observation,
            interventions=interventions,
            threads=threads,
        )
    finally:
        torch.set_num_threads(threads)


def _analyze(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    plan: Budget,
    aux_weight: float,
    decision_belief_in_observation: bool,
    interventions: bool,
    threads: int,
) -> dict[str, Any]:
    clock = StageClock(label, threads)
    say = clock.say
    with clock.stage("load", "the final checkpoint's module and the untrained control"):
        run = RunArtifacts.open(context.results_dir)
        checkpoint = run.final_checkpoint()
        module = load_module(checkpoint)  # module only: no env runners, no learner
        point = task.point_of(plan)  # the run's operating point (task_point setting)
        make_env = probing.probe_env_factory(decision_belief_in_observation, point)
        probe_env = make_env(1)
        layout, action_space = probe_env.layout, probe_env.single_action_space
        probe_env.close()
        # The untrained controls (plan.untrained_inits): the first is the control of every
        # stage; the incremental test replays each (one random network is one draw).
        untrained_modules = untrained_controls(module_spec, make_env, context.seed, plan)
        control = untrained_modules[0]
    settings = probing.rollout_settings(plan, context.seed, make_env, action_space)
    size = f"{plan.probe_episodes} episodes x ({plan.warmup_steps} + {plan.probe_steps}) steps"
    # Every data set once, each stepped as one batch of episodes; every later stage reads
    # these (controls_by_data, the yardstick and the interventions collect none of their own).
    with clock.stage("rollouts", f"greedy, sampled, belief-MDP- and random-driven ({size})"):
        data = {
            name: controls.data_set(name, module, settings, plan) for name in controls.DATA_SETS
        }
        sampled = collect_rollouts(
            module,
            n_episodes=plan.probe_episodes,
            episode_steps=plan.probe_steps,
            policy="sample",
            **settings,
        )
    greedy = data["agent_greedy"]
    # Each replay once: the untrained control on every data set, every residual of the agent
    # on its greedy rollouts (the per-layer probes; "final_norm" is the probed representation).
    with clock.stage("replays", "the untrained control on every data set, the agent's residuals"):
        steps = probing.REPLAY_STEPS
        untrained_by_data = {
            name: replay_rollouts(control, r, steps_per_call=steps) for name, r in data.items()
        }
        residuals = replay_rollouts_named(module, greedy, steps_per_call=steps)
    untrained_features = untrained_by_data["agent_greedy"]

    tokens = greedy.observations[..., layout.tokens]

    with clock.stage("probes", f"agent, with {plan.n_permutations} permutations of each null"):
        agent = evaluate_probe(
            greedy.representations,
            greedy.targets,
            dataclasses.replace(
                controls.probe_settings(plan, context.seed),
                n_permutations=plan.n_permutations,
                n_within_permutations=plan.n_permutations,
            ),
            target_names=probing.BELIEF_NAMES,
            branch_tokens=tokens,
        )

    # Every control on the agent's data, once (the library's score_controls, reading the agent
    # probe above): the untrained module, the observation, window MLPs on the last k tokens and
    # executed actions and on tokens only; branches of the last BRANCH_K visible tokens, and of
    # those plus the binned last BRANCH_K executed actions (controls.action_branching). Every
    # score is on the agent's held-out steps and its bootstrap resamples; the best window has
    # the highest within-branch R² (chosen on held-out steps: it can only flatter the window).
    ks = list(range(1, plan.window_k_max + 1))
    # The window fits on the greedy data, kept for the incremental test: its windows alone
    # (a) are these windows on tokens and actions (same inputs, seeds: read, not refitted).
    greedy_fits = FitMemo()
    with clock.stage("controls", f"untrained, observation, windows k = {ks[0]}..{ks[-1]}"):
        scored = controls.score_on(
            greedy,
            untrained_features,
            layout=layout,
            plan=plan,
            seed=context.seed,
            data="agent_greedy",
            say=say,
            agent=agent,
            memo=greedy_fits,
        )
    branching = scored.branching
    branchings = branching.labels
    untrained, observation, windows = scored.control, scored.observation, scored.windows
    differences = {  # the top-level block's three (controls_by_data's adds the tokens-only)
        name: scored.differences[name]
        for name in (
            "agent_minus_untrained_module",
            "agent_minus_observation",
            "agent_minus_best_window",
        )
    }

    # Memory beyond a window (issue 52 item 1): the library's incremental R², same split.
    with clock.stage("incremental_r2", f"windows k = {ks[0]}..{ks[-1]} alone and with read-outs"):
        others = [
            replay_rollouts(other, greedy, steps_per_call=probing.REPLAY_STEPS)
            for other in untrained_modules[1:]
        ]
        incremental_record = incremental.measure(
            greedy,
            [untrained_features, *others],
            agent=agent,
            branchings=branchings,
            layout=layout,
            plan=plan,
            say=say,
            memo=greedy_fits,
        )
    del greedy_fits  # its predictions (~3 MB per fit) are read by nothing later

    # The same test on the sampled rollouts: the policy the agent trained and is scored with
    # (at the memory point its greedy policy earns a fraction of its sampled one).
    with clock.stage("incremental_r2_sampled", "the same on the agent's sampled rollouts"):
        untrained_sampled = [
            replay_rollouts(other, sampled, steps_per_call=steps) for other in untrained_modules
        ]
        incremental_sampled = incremental.measure_with_own_probe(
            sampled,
            untrained_sampled,
            layout=layout,
            plan=plan,
            seed=context.seed,
            data=incremental.DATA_SAMPLED,
            say=say,
        )

    with clock.stage("layers", "a probe of every residual (the agent probe's split)"):
        layers = probe_named(
            residuals,
            greedy.targets,
            controls.probe_settings(plan, context.seed),
            target_names=probing.BELIEF_NAMES,
            branch_tokens=tokens,
            progress=say,
        )

    with clock.stage("over_training", "the first greedy episodes replayed through each checkpoint"):
        training = _probe_over_training(context, run, greedy, tokens, plan, label, say)

    with clock.stage("controls_by_data", "every control on the belief-MDP and random data"):
        by_data = controls.controls_by_data(
            module,
            control,
            make_env=make_env,
            plan=plan,
            seed=context.seed,
            rollouts=data,
            untrained=untrained_by_data,
            blocks={"agent_greedy": controls.block(scored, "agent_greedy")},
            say=say,
        )

    values = task.solver_values(point=point)
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
            "model": task.MODEL,
            "task_point": plan.task_point,
            "alpha": point.alpha,
            "mixing": point.mixing,
            "task": task.TASK,
            "w_max": point.w_max,
            "beta": point.beta,
            "occupancy_states": list(task.OCCUPANCY_STATES),
            "observation_delay": point.delay,
            "episode_length": task.EPISODE_LENGTH,
            "decision_belief_in_observation": decision_belief_in_observation,
        },
        "aux_weight": aux_weight,
        "budget": dataclasses.asdict(plan),  # the leaf's Budget dataclass
        "checkpoint": str(checkpoint),
        "env_steps": final.get(STEPS_KEY),
        "training_iterations": final.get(ITERATION_KEY),
        "representation": "the module's encode_step after reading each step (context: the "
        "carried state): the final normed residual stream",
        "target": "info['decision_belief']: P(state now | tokens seen, own executed actions)",
        "n_episodes": greedy.n_episodes,
        "branch_k": probing.BRANCH_K,
        "branchings": {
            probing.TOKEN_BRANCHES: f"equal last {probing.BRANCH_K} visible tokens",
            probing.ACTION_BRANCHES: f"equal last {probing.BRANCH_K} visible tokens and executed "
            f"actions, each action coordinate in {probing.ACTION_BINS} equal-frequency bins "
            "(mid-rank among the probe's train episodes; ties share a bin)",
        },
        "action_branching": branching.record,
        "probe": agent.report.to_dict(),
        "controls": {
            "data": "every control is scored on the agent's greedy rollouts: the untrained "
            "module replays the agent's observations; same targets, branches, split, resamples",
            "untrained_module_probe": untrained.report.to_dict(),
            "observation_probe": observation.report.to_dict(),
        },
        "scores": {name: value.to_dict() for name, value in scored.scores.items()},
        "differences": {name: value.to_dict() for name, value in differences.items()}
        | {"best_window_k": scored.best_window_k},
        "windows": windows.to_dict(),
        incremental.KEY: incremental_record,
        incremental.KEY_SAMPLED: incremental_sampled,
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
        with clock.stage("interventions", "belief edits at the probed layers, agent and control"):
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
    with clock.stage("yardstick", "memory yardstick and baselines (yardstick.json)"):
        record["yardstick"] = yardstick.headline(
            yardstick.measure(
                context.results_dir,
                plan=plan,
                seed=context.seed,
                label=label,
                module=module,
                decision_belief_in_observation=decision_belief_in_observation,
                greedy=greedy,
                agent=agent,
                say=say,
            )
        )
    with clock.stage("figures", "belief simplex and learning curve"):
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
            task.references_from(values),
            title=f"{label}: occupancy control "
            f"(beta {point.beta}, w_max {point.w_max}, delay {point.delay}"
            + (f", alpha {point.alpha}, mixing {point.mixing})" if point != task.FLAGSHIP else ")"),
            evaluations={"final greedy": returns["greedy"], "final sampled": returns["sampled"]},
        )
    record["timings"] = clock.record()
    record["analysis_wall_time_s"] = record["timings"]["total_s"]
    write_json(context.results_dir / "probe_metrics.json", record)
    say(f"wrote probe_metrics.json ({record['analysis_wall_time_s']:.0f} s)")
    return record


def _probe_over_training(
    context: RunContext,
    run: RunArtifacts,
    greedy: Rollouts,
    tokens: np.ndarray,
    plan: Budget,
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
    subset = greedy.head(n)
    say(f"probes over training: {len(pairs)} checkpoints, {n} episodes replayed through each")
    probes = probe_checkpoints(
        pairs,
        subset,
        controls.probe_settings(plan, context.seed),  # the agent probe's stream and seed
        target_names=probing.BELIEF_NAMES,
        branch_tokens=tokens[:n],
        progress=say,
        steps_per_call=probing.REPLAY_STEPS,
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


def summary(iterations: int | None, record: Mapping[str, Any]) -> Results:
    """result.json: the run's headline metrics, each named once where the record holds it
    (the names are the keys result.json had before named metrics, "/" for a group); the
    probe estimates keep their intervals. probe_metrics.json stays the full record."""
    controls_record = record["controls"]
    scores, differences = record["scores"], record["differences"]
    agent_within = record["probe"].get("within_branch") or {}
    windows = record["windows"]
    training = record["training"]["checkpoints"]
    within, action = ("within_branch", probing.TOKEN_BRANCHES), ("within_branch",)
    action += (probing.ACTION_BRANCHES,)
    out = Results()
    if "action_branching" in record:
        out.add("action_branches_added", record["action_branching"]["branches_added_by_actions"])
    if controls.KEY in record:
        out.include(controls.headline(record[controls.KEY]), prefix=f"{controls.KEY}/")
    for key in (incremental.KEY, incremental.KEY_SAMPLED):
        if key in record:
            out.include(incremental.headline(record[key]), prefix=f"{key}/")
    out.add("iterations", iterations)
    out.add("env_steps", record["env_steps"])
    for policy, value in record["return_per_step"].items():
        out.add(f"return_per_step/{policy}", value)
    for key in task.REFERENCES:
        out.add(f"solver_values/{key}", record["solver_values"].get(key))
    for policy, value in record["fraction_of_belief_mdp"].items():
        out.add(f"fraction_of_belief_mdp/{policy}", value)
    out.add("probe_r2", probing.estimate(record["probe"], "r2_pooled"))
    out.add(
        "probe_r2_within_branch", probing.estimate(record["probe"], "within_branch", "r2_pooled")
    )
    out.add("probe_r2_within_action_branch", probing.estimate(scores["agent"], *action))
    untrained, observation = (
        controls_record["untrained_module_probe"],
        controls_record["observation_probe"],
    )
    out.add("untrained_r2", probing.estimate(untrained, "r2_pooled"))
    out.add("untrained_r2_within_branch", probing.estimate(untrained, "within_branch", "r2_pooled"))
    out.add("observation_r2", probing.estimate(observation, "r2_pooled"))
    out.add(
        "observation_r2_within_branch",
        probing.estimate(observation, "within_branch", "r2_pooled"),
    )
    minus_untrained = differences["agent_minus_untrained_module"]
    minus_window = differences["agent_minus_best_window"]
    out.add("agent_minus_untrained_within_branch", probing.estimate(minus_untrained, *within))
    out.add("agent_minus_best_window_within_branch", probing.estimate(minus_window, *within))
    out.add("agent_minus_best_window_within_action_branch", probing.estimate(minus_window, *action))
    out.add("best_window_k", differences["best_window_k"])
    for row in windows["windows"]:
        out.add(f"window_r2/k{row['k']}", probing.estimate(row["window"], "r2_pooled"))
    for row in windows["windows"]:
        out.add(f"window_r2_within_branch/k{row['k']}", probing.estimate(row["window"], *within))
    out.add(
        "window_reaches_agent_within_branch_at_k",
        windows["history_worth"][probing.TOKEN_BRANCHES]["window_reaches_agent_at_k"],
    )
    for row in record["layers"]:
        out.add(f"layer_r2_within_branch/{row['name']}", row["within_branch_r2_pooled"])
    permutation = record["probe"].get("permutation") or {}
    out.add("permutation_p_value", permutation.get("p_value"))
    out.add(
        "within_branch_permutation_p_value", (agent_within.get("permutation") or {}).get("p_value")
    )
    out.add("p_value_floor", permutation.get("p_value_floor"))
    first = probing.estimate(training[0], "r2_pooled") if training else None
    out.add("r2_at_first_checkpoint", first)
    out.add("analysis_wall_time_s", record["analysis_wall_time_s"])
    for stage, seconds in ((record.get("timings") or {}).get("stages_s") or {}).items():
        out.add(f"analysis_timings/{stage}", seconds)
    # interventions.intervention_headline: {layer: {counterfactual: {quantity: value}}}.
    for layer, by_edit in (record.get("interventions") or {}).items():
        if layer == "file":  # the file it summarises: a note, not a metric
            out.notes["interventions"] = by_edit
            continue
        for edit, quantities in by_edit.items():
            for quantity, value in quantities.items():
                out.add(f"interventions/{layer}/{edit}/{quantity}", value)
    return out


# ---------------------------------------------------------------------------- stages

PROBE_METRICS = "probe_metrics.json"


def write_result(context: RunContext) -> dict[str, Any]:
    """The `result` stage: result.json (`summary`) from the run's probe_metrics.json; its
    iterations are the last metrics row's (the trainer's count, what run_algorithm returns)."""
    record = json.loads((context.results_dir / PROBE_METRICS).read_text(encoding="utf-8"))
    result = summary(record["training_iterations"], record).to_json()
    write_json(context.results_dir / "result.json", result)
    return result


def _final_agent_data(
    context: RunContext,
    key: str,
    *,
    clock: StageClock,
    module_spec: RLModuleSpec,
    decision_belief_in_observation: bool,
    inits: int,
) -> tuple[Rollouts, str, list[np.ndarray], Any]:
    """The final checkpoint's rollouts of `key` (incremental.KEY: greedy, KEY_SAMPLED:
    sampled) collected again as `analyze` collects them (the same named streams, so the same
    episodes) and the first `inits` untrained inits replayed on them: (rollouts, their
    description, features per init, the env's observation layout)."""
    plan = context.settings
    run = RunArtifacts.open(context.results_dir)
    module = load_module(run.final_checkpoint())
    make_env = probing.probe_env_factory(decision_belief_in_observation, task.point_of(plan))
    env = make_env(1)
    layout, action_space = env.layout, env.single_action_space
    env.close()
    untrained_modules = untrained_controls(module_spec, make_env, context.seed, plan)[:inits]
    settings = probing.rollout_settings(plan, context.seed, make_env, action_space)
    with clock.stage("rollouts", f"the agent's rollouts for {key}"):
        if key == incremental.KEY:
            rollouts, data = (
                controls.data_set("agent_greedy", module, settings, plan),
                incremental.DATA,
            )
        elif key == incremental.KEY_SAMPLED:
            rollouts = collect_rollouts(
                module,
                n_episodes=plan.probe_episodes,
                episode_steps=plan.probe_steps,
                policy="sample",
                **settings,
            )
            data = incremental.DATA_SAMPLED
        else:
            raise ValueError(f"not an incremental test: {key!r}")
    with clock.stage("replays", f"{len(untrained_modules)} untrained init(s) replayed"):
        features = [
            replay_rollouts(other, rollouts, steps_per_call=probing.REPLAY_STEPS)
            for other in untrained_modules
        ]
    return rollouts, data, features, layout


def _probe_metrics(context: RunContext) -> dict[str, Any]:
    path = context.results_dir / PROBE_METRICS
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run the `analysis` stage first")
    return json.loads(path.read_text(encoding="utf-8"))


def reanalyse_incremental(
    context: RunContext,
    key: str,
    *,
    label: str,
    module_spec: RLModuleSpec,
    decision_belief_in_observation: bool = False,
) -> dict[str, Any]:
    """The incremental test `key` (incremental.KEY: greedy rollouts, KEY_SAMPLED: sampled)
    alone on a finished, analysed run, with the plan's `untrained_inits`: the final
    checkpoint's rollouts collected again as `analyze` collects them (the same named streams,
    so the same episodes), every untrained init replayed on them, the test on its own probe
    (`incremental.measure_with_own_probe`: the analysis probe's settings, split and
    resamples). The record replaces probe_metrics.json's `key` (every other key kept) and
    result.json is written again from it. Returns the new record."""
    plan = context.settings
    _probe_metrics(context)  # refused before the work when the analysis has not run
    clock = StageClock(label, torch.get_num_threads())
    rollouts, data, features, layout = _final_agent_data(
        context,
        key,
        clock=clock,
        module_spec=module_spec,
        decision_belief_in_observation=decision_belief_in_observation,
        inits=plan.untrained_inits,
    )
    with clock.stage(key, "the test"):
        new = incremental.measure_with_own_probe(
            rollouts,
            features,
            layout=layout,
            plan=plan,
            seed=context.seed,
            data=data,
            say=clock.say,
        )
    record = _probe_metrics(context)  # read after the work: every other key as it is now
    record[key] = new
    write_json(context.results_dir / PROBE_METRICS, record)
    write_result(context)
    clock.say(f"wrote {key} into {PROBE_METRICS} and result.json")
    return dict(new)


def check_window_capacity(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    decision_belief_in_observation: bool = False,
) -> dict[str, Any]:
    """window_capacity.py's check on a finished, analysed run: the sampled rollouts collected
    again, untrained init 0 replayed, the incremental test with each window MLP;
    writes window_capacity.json (with how its recorded-regressor rows match the run's own
    incremental_r2_sampled record) and returns it."""
    own = _probe_metrics(context).get(incremental.KEY_SAMPLED)
    if own is None:
        raise ValueError(f"{context.results_dir}: no {incremental.KEY_SAMPLED} record to check")
    clock = StageClock(label, torch.get_num_threads())
    rollouts, _, features, layout = _final_agent_data(
        context,
        incremental.KEY_SAMPLED,
        clock=clock,
        module_spec=module_spec,
        decision_belief_in_observation=decision_belief_in_observation,
        inits=1,
    )
    with clock.stage(window_capacity.STAGE, f"{len(window_capacity.REGRESSORS)} window MLPs"):
        record = window_capacity.measure(
            rollouts,
            features[0],
            layout=layout,
            plan=context.settings,
            seed=context.seed,
            say=clock.say,
        )
    record["recorded_matches"] = window_capacity.recorded_matches(record, own)
    record["seconds"] = {**clock.seconds, "total": round(time.perf_counter() - clock.started, 3)}
    record["torch_threads"] = clock.threads  # the fits' (the rollouts step on one)
    write_json(context.results_dir / window_capacity.FILE, record)
    clock.say(
        f"wrote {window_capacity.FILE}: recorded rows match within {record['recorded_matches']}"
    )
    return record


def stages(
    *,
    label: str,
    module_spec: RLModuleSpec,
    aux_weight: float = 0.0,
    decision_belief_in_observation: bool = False,
    interventions: bool = False,
    incremental_alone: bool = False,
) -> tuple[AnalysisStage, ...]:
    """A training leaf's stages: `analysis` (`analyze` with the leaf's options, on its final
    and every recorded checkpoint) then `result` (result.json from its record). The leaf's
    run() calls them after training (`run_stages`, `in_run`); `rl-harness analyze LEAF RUN`
    calls the same on a finished run.

    `incremental_alone` (the memory leaves) also declares `incremental_r2` and
    `incremental_r2_sampled` between them (`reanalyse_incremental`: one test alone on a
    finished run, e.g. one analysed with fewer untrained inits: `rl-harness analyze LEAF RUN
    --stage incremental_r2_sampled`). run() leaves them out (`in_run`: the analysis computes
    both records); `analyze` without --stage runs them after the analysis (the same test
    again: name a stage to run one).

    Every leaf also declares `window_capacity` last, on request (`check_window_capacity`:
    the incremental test again with other window MLPs; `rl-harness analyze LEAF RUN --stage
    window_capacity`): never in-run nor in a call that names no stage."""

    def run_analysis(context: RunContext) -> dict[str, Any]:
        return analyze(
            context,
            label=label,
            module_spec=module_spec,
            plan=context.settings,
            aux_weight=aux_weight,
            decision_belief_in_observation=decision_belief_in_observation,
            interventions=interventions,
        )

    def run_incremental(key: str) -> Any:
        def run(context: RunContext) -> dict[str, Any]:
            return reanalyse_incremental(
                context,
                key,
                label=label,
                module_spec=module_spec,
                decision_belief_in_observation=decision_belief_in_observation,
            )

        return run

    # They rewrite one key of probe_metrics.json; what they compute reads only the checkpoints.
    alone = tuple(
        AnalysisStage(key, run_incremental(key), writes=(PROBE_METRICS, "result.json"))
        for key in (incremental.KEY, incremental.KEY_SAMPLED)
        if incremental_alone
    )

    def run_window_capacity(context: RunContext) -> dict[str, Any]:
        return check_window_capacity(
            context,
            label=label,
            module_spec=module_spec,
            decision_belief_in_observation=decision_belief_in_observation,
        )

    # Costs ~9x the incremental test: only when named (--stage window_capacity).
    capacity = AnalysisStage(
        window_capacity.STAGE,
        run_window_capacity,
        reads=(PROBE_METRICS,),
        writes=(window_capacity.FILE,),
        on_request=True,
    )
    written = [PROBE_METRICS, "solver_values.json", "yardstick.json", "belief_simplex.png"]
    written += ["learning_curve.png", "r2_over_training.png"]
    written += ["interventions.json", "interventions.png"] if interventions else []
    return (
        AnalysisStage("analysis", run_analysis, reads=("metrics.jsonl",), writes=tuple(written)),
        *alone,
        AnalysisStage(
            "result",
            write_result,
            reads=(PROBE_METRICS,),
            checkpoints=False,
            writes=("result.json",),
        ),
        capacity,
    )


def in_run(declared: tuple[AnalysisStage, ...]) -> tuple[AnalysisStage, ...]:
    """The stages a leaf's run() runs after training: `declared` without the incremental
    tests alone (the analysis computes both)."""
    alone = (incremental.KEY, incremental.KEY_SAMPLED)
    return tuple(stage for stage in declared if stage.name not in alone)

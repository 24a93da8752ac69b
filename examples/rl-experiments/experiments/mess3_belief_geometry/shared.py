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
- the analysis (`analyze`): return per step under sampled and greedy actions, an affine
  probe of the agent's representation for the decision belief (globally and within
  branches of equal last BRANCH_K visible tokens, with a permutation null), the same probe
  on two controls (an untrained module of the same architecture, the raw observation), and
  the plots.
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

from rl_harness import RunContext, RunResult, write_json
from rl_harness.analysis import (
    RunArtifacts,
    collect_rollouts,
    evaluate_probe,
    info_target,
    load_module,
    plot_belief_simplex,
    rllib_action_transform,
)
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.seeding import stream_seed

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
PROBE_RIDGE = 1e-6
PROBE_TEST_FRACTION = 0.25
BELIEF_NAMES = ["decision_belief_0", "decision_belief_1", "decision_belief_2"]

# The learning curve.
RETURN_KEY = "env_runners/episode_return_mean"
LENGTH_KEY = "env_runners/episode_len_mean"
STEPS_KEY = "num_env_steps_sampled_lifetime"
# Solver key -> label of its reference line (the order they are drawn in).
REFERENCES = {
    "oracle": "oracle (state known)",
    "belief_mdp": "belief-MDP ceiling",
    "stack_2": "best stack-2",
    "memoryless": "best memoryless",
}


class ProbeBudget(Protocol):
    """The part of a leaf's Budget the analysis reads (the leaf's Budget is a dataclass)."""

    probe_episodes: int  # episodes rolled out per policy (a quarter held out for the probe)
    warmup_steps: int  # played before recording, so the agent's context has filled
    probe_steps: int  # recorded steps per episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval
    n_permutations: int  # refits on episode-shuffled targets for the permutation null


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
    for the solve). Keys: oracle, belief_mdp (belief_vi at DELAY), stack_2, memoryless
    (reactive), and `source`. If the solvers are not installed the values are None and
    `source` says why, so a run still completes and says what it lacks.
    """
    try:
        from rl_harness.envs.mess3 import solvers
    except ImportError as error:
        return {key: None for key in REFERENCES} | {
            "source": f"unavailable: rl_harness.envs.mess3.solvers ({error})"
        }
    problem = solvers.OccupancyProblem(ALPHA, W_MAX, BETA, OCCUPANCY_STATES)
    values = {
        "oracle": solvers.solve_oracle(problem, cache=cache).value,
        "belief_mdp": solvers.solve_belief_vi(problem, DELAY, cache=cache).value,
        "stack_2": solvers.solve_stack(problem, DELAY, 2, cache=cache).value,
        "memoryless": solvers.solve_reactive(problem, DELAY, cache=cache).value,
    }
    return values | {
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


def _probe_env_factory(decision_belief_in_observation: bool):
    config = env_config(
        ["decision_belief"],
        decision_belief_in_observation=decision_belief_in_observation,
        random_first_episode_length=False,
    )
    return functools.partial(HMMVectorEnv, env_config=config)


def read_representation(module: RLModule, batch: dict[str, Any]) -> torch.Tensor:
    """What the probe reads: `module.encode` of the one-step batch the rollout feeds it
    (observation with a time axis of 1 and the carried state), i.e. the representation
    after the module has read this step: the stateful transformer's final normed residual
    stream (its context from the carried K/V cache), a GRU's hidden state."""
    return module.encode(batch)


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


def analyze(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    plan: ProbeBudget,
    aux_weight: float = 0.0,
    decision_belief_in_observation: bool = False,
) -> dict[str, Any]:
    """Evaluate and probe this run's trained agent; write probe_metrics.json,
    solver_values.json, belief_simplex.png and learning_curve.png into the results folder.

    `module_spec` is the leaf's (for the untrained control), `plan` its Budget (recorded
    whole); `decision_belief_in_observation` must match the leaf's env.
    """
    started = time.perf_counter()
    run = RunArtifacts.open(context.results_dir)
    checkpoint = run.final_checkpoint()
    module = load_module(checkpoint)  # module only: no env runners, no learner
    make_env = _probe_env_factory(decision_belief_in_observation)
    probe_env = make_env(1)
    layout, action_space = probe_env.layout, probe_env.single_action_space
    probe_env.close()
    collect = functools.partial(
        collect_rollouts,
        make_env=make_env,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        warmup_steps=plan.warmup_steps,
        seed=context.seed,
        target=info_target("decision_belief"),
        num_envs=min(plan.probe_episodes, 64),
        representation=read_representation,
        # RLlib's default Box handling: the module acts in [-1, 1], the env gets the box.
        action_transform=rllib_action_transform(action_space),
    )
    greedy = collect(module, policy="greedy")
    sampled = collect(module, policy="sample")
    untrained_rollouts = collect(
        untrained_module(module_spec, make_env, stream_seed(context.seed, "study", "untrained")),
        policy="greedy",
    )

    def probe(rollouts: Any, features: np.ndarray, permutations: int = 0) -> Any:
        return evaluate_probe(
            features,
            rollouts.targets,
            seed=context.seed,
            ridge=PROBE_RIDGE,
            test_fraction=PROBE_TEST_FRACTION,
            n_bootstrap=plan.n_bootstrap,
            target_names=BELIEF_NAMES,
            branch_tokens=rollouts.observations[..., layout.tokens],
            branch_k=BRANCH_K,
            n_permutations=permutations,
        )

    agent = probe(greedy, greedy.representations, plan.n_permutations)
    observation = probe(greedy, greedy.observations)
    untrained = probe(untrained_rollouts, untrained_rollouts.representations)

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
        "representation": "module.encode after reading each step (context: the carried state)",
        "target": "info['decision_belief']: P(state now | tokens seen, own executed actions)",
        "n_episodes": greedy.n_episodes,
        "branch_k": BRANCH_K,
        "probe": agent.report.to_dict(),
        "controls": {
            "untrained_module_probe": untrained.report.to_dict(),
            "observation_probe": observation.report.to_dict(),
        },
        "return_per_step": returns,
        "solver_values": values,
        "fraction_of_belief_mdp": (
            {k: v / ceiling for k, v in returns.items() if v is not None} if ceiling else None
        ),
    }
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
    return record


def summary(result: RunResult, record: dict[str, Any]) -> dict[str, Any]:
    """The compact result a leaf's run() returns (the harness stores it as result.json)."""

    def value(report: Mapping[str, Any], *path: str) -> float | None:
        for key in path:
            report = report.get(key) if isinstance(report, Mapping) else None
        return report.get("value") if isinstance(report, Mapping) else None

    controls = record["controls"]
    return {
        "iterations": result.iterations,
        "env_steps": record["env_steps"],
        "return_per_step": record["return_per_step"],
        "solver_values": {key: record["solver_values"].get(key) for key in REFERENCES},
        "fraction_of_belief_mdp": record["fraction_of_belief_mdp"],
        "probe_r2": value(record["probe"], "r2_pooled"),
        "probe_r2_within_branch": value(record["probe"], "within_branch", "r2_pooled"),
        "untrained_r2": value(controls["untrained_module_probe"], "r2_pooled"),
        "untrained_r2_within_branch": value(
            controls["untrained_module_probe"], "within_branch", "r2_pooled"
        ),
        "observation_r2": value(controls["observation_probe"], "r2_pooled"),
        "observation_r2_within_branch": value(
            controls["observation_probe"], "within_branch", "r2_pooled"
        ),
        "permutation_p_value": (record["probe"].get("permutation") or {}).get("p_value"),
        "analysis_wall_time_s": record["analysis_wall_time_s"],
    }

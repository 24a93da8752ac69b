"""MESS3 token guess: what every leaf shares (the process, the env, the ceilings, the analysis).

The budgets, the agent and the shared PPOConfig are in spec.py; this module holds the rest
that must stay identical between the leaves so that their numbers compare:

- the process and env (`env_config`): passive MESS3 (x 0.05, alpha 0.85), the agent guesses
  the next token (NextTokenTask: reward 1 when right) and sees only the last TOKEN_WINDOW
  tokens (the env's newest-first one-hot window, no actions, no belief);
- the ceilings (`ceilings`): exact, from the library's mixed-state presentation: the
  Bayes-optimal accuracy of a TOKEN_WINDOW-token observer, mean over the stationary process
  of max_k P(next token = k | belief), and the same for the newest token alone; the
  conditional entropy H(X_11 | X_1..X_10), the best per-token loss of a 10-token window;
- the analysis (`analyze`): at step 0 and at log-spaced checkpoints (iterations 1, 2, 4, ...
  and the last), greedy accuracy on probe episodes against the Bayes-optimal accuracy on
  the same steps, and an affine probe from the post-final-norm residual (the
  representation the heads read) to the exact belief, globally and within branches of
  equal last BRANCH_K tokens; at the last checkpoint also every depth of the residual
  stream and the library's policy read-outs against the Bayes guesser (`policy_readouts`:
  action fractions overall and by belief argmax, agreement, on the agent's greedy and sampled
  play, beside the guesser's exact accuracy); the fractal plot of probed beliefs beside the
  exact mixed-state presentation.

Checkpoints (`checkpoint_schedule`): the leaves save the run's own initial weights before
any training (step 0), iterations 1, 2, 4, 8, ... and the last; the analysis probes every
checkpoint the run recorded in its checkpoints.jsonl (`probe_points`), so step 0 is the
agent the run started from. A resumed run saves no step 0: its probes start at its first
checkpoint and the summary's step-0 fields are None.

The probe episodes are the same at every checkpoint: the process is passive (actions never
change it) and the env draws from named streams of each episode's seed, so every checkpoint
sees the same tokens and beliefs (checked: `analyze` compares the observations).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule

from rl_harness import (
    ENV_STEPS_KEY,
    ITERATION_KEY,
    CheckpointSchedule,
    Results,
    RunContext,
    write_json,
)
from rl_harness.analysis import (
    AnalysisStage,
    ProbeSettings,
    RunArtifacts,
    RunCheckpoint,
    collect_rollouts,
    evaluate_probe,
    info_target,
    load_module,
    mixed_state_scatter,
    policy_readouts,
    run_checkpoints,
    simplex_scatter,
)
from rl_harness.envs.hmm import (
    HMMModel,
    HMMVectorEnv,
    mixed_state_presentation,
    next_token_probabilities,
)
from rl_harness.envs.mess3 import mess3_model

# The process (explicit: libraries default to other values).
X = 0.05
ALPHA = 0.85
N_TOKENS = 3
TOKEN_WINDOW = 10  # the paper's context: the agent sees the last 10 tokens, nothing older
EPISODE_LENGTH = 1024
MODEL = "rl_harness.envs.mess3:mess3_model"
TASK = "rl_harness.envs.mess3.tasks:NextTokenTask"

# The probe.
BRANCH_K = 2  # within-branch R²: steps grouped by their last 2 tokens
PROBE_RIDGE = 1e-6
PROBE_TEST_FRACTION = 0.25
BELIEF_NAMES = ["belief_state_0", "belief_state_1", "belief_state_2"]
REPRESENTATION = "final_norm"  # the post-final-norm residual at the newest position

# probe_metrics.json: 2 = step 0 is the run's own step-0 checkpoint (before it, unversioned:
# a fresh module of the same spec seeded from the run's seed stood in for it).
PROBE_SCHEMA_VERSION = 2

# metrics.jsonl keys.
STEPS_KEY = ENV_STEPS_KEY


@dataclasses.dataclass(frozen=True)
class TrainingCurve:
    """A leaf's training metric for the learning curve's third panel."""

    key: str  # metrics.jsonl key
    per: str | None  # divide by this key (e.g. episode length), or None
    label: str  # y axis label
    references: Mapping[str, float]  # {line label: value}


class ProbeBudget(Protocol):
    """The part of the study's Budget (spec.py) the analysis reads."""

    probe_episodes: int  # episodes rolled out at every checkpoint (a quarter held out)
    warmup_steps: int  # played before recording: the window fills (>= TOKEN_WINDOW)
    probe_steps: int  # recorded steps per probe episode
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval


def env_config(info: Sequence[str], *, random_first_episode_length: bool = True) -> dict[str, Any]:
    """The MESS3 next-token env (`rl_harness.envs.hmm.ENV_ID`): observation = the last
    TOKEN_WINDOW tokens, newest first, one-hot (zeros before the first token).
    `random_first_episode_length` spreads episode ends over the vectorized copies in
    training; the probe's rollouts turn it off."""
    return {
        "model": MODEL,
        "model_kwargs": {"x": X, "alpha": ALPHA},
        "task": TASK,
        "episode_length": EPISODE_LENGTH,
        "random_first_episode_length": random_first_episode_length,
        "token_window": TOKEN_WINDOW,
        "action_window": 0,
        "info": list(info),
    }


def model() -> HMMModel:
    return mess3_model(x=X, alpha=ALPHA)


# ---------------------------------------------------------------------------- ceilings


@functools.cache
def ceilings() -> dict[str, float]:
    """Exact reference values from the mixed-state presentation (MSP) of the process.

    At depth d the MSP holds every d-token prefix's belief and probability from the
    stationary start, so sum_prefix P(prefix) max_k P(next = k | belief) is exactly the
    accuracy of the best guesser that sees those d tokens. Depth TOKEN_WINDOW is this
    agent's ceiling; depth TOKEN_WINDOW + 2 shows how close it is to unbounded memory.
    """
    hmm = model()
    deeper = TOKEN_WINDOW + 2
    msp = mixed_state_presentation(hmm, deeper)

    def accuracy(depth: int) -> float:
        layer = msp.layers[depth]
        return float(layer.probabilities @ next_token_probabilities(hmm, layer.beliefs).max(-1))

    entropies = msp.conditional_entropies()
    return {
        "bayes_optimal_accuracy": accuracy(TOKEN_WINDOW),
        f"bayes_optimal_accuracy_{deeper}_tokens": accuracy(deeper),
        "newest_token_accuracy": accuracy(1),
        "uniform_accuracy": 1.0 / hmm.n_tokens,
        "window_entropy_bits": float(entropies[TOKEN_WINDOW]),
        "newest_token_entropy_bits": float(entropies[1]),
        "token_entropy_bits": float(entropies[0]),
    }


# ---------------------------------------------------------------------------- probe points


def _probe_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, env_config(["belief"], random_first_episode_length=False))


def checkpoint_schedule() -> CheckpointSchedule:
    """Step 0 (the run's initial weights, before any training) and iterations 1, 2, 4, 8,
    ...; the runners always add the last iteration's."""
    return CheckpointSchedule(at_start=True, log_base=2.0, log_first=1.0, log_unit="iterations")


def probe_points(run: RunArtifacts) -> list[RunCheckpoint]:
    """The run's own checkpoints (checkpoints.jsonl: step 0, log-spaced, the last) that are
    still on this disk, oldest first, one per iteration; env steps filled from metrics.jsonl
    where a row lacks them."""
    steps = {row.get(ITERATION_KEY): row.get(STEPS_KEY) for row in run.metrics()}
    points: dict[int, RunCheckpoint] = {}
    for checkpoint in run_checkpoints(run):
        if not isinstance(checkpoint.path, Path):
            continue  # a URI: the probe loads modules from local folders
        if checkpoint.env_steps is None:
            count = 0 if checkpoint.iteration == 0 else steps.get(checkpoint.iteration)
            env_steps = int(count) if isinstance(count, int | float) else None
            checkpoint = dataclasses.replace(checkpoint, env_steps=env_steps)
        points[checkpoint.iteration] = checkpoint
    if not points:
        raise RuntimeError(f"run {run.results_dir} has no local checkpoint to probe")
    return [points[iteration] for iteration in sorted(points)]


# ---------------------------------------------------------------------------- analysis


def residual_reader(module: RLModule, batch: dict[str, Any]) -> torch.Tensor:
    """Every depth of the residual stream at the newest position, concatenated in the
    order of `encode_step_residuals` ("embed", "block_1".."block_L", "final_norm"), each
    d_model wide: one rollout gives the post-final-norm probe and the per-depth ones."""
    residuals, _ = module.encode_step_residuals(batch)
    return torch.cat(list(residuals.values()), dim=-1)


def residual_names(module: RLModule) -> list[str]:
    """The names `residual_reader` concatenates, in its order (read from the module)."""
    obs = torch.zeros((1, *module.observation_space.shape))
    with torch.inference_mode():
        residuals, _ = module.encode_step_residuals({"obs": obs})
    return list(residuals)


def expected_accuracy(hmm: HMMModel, beliefs: np.ndarray, actions: np.ndarray) -> dict[str, float]:
    """On recorded steps, exact given each step's belief: `greedy` = mean P(next token =
    the action | belief), `bayes_optimal` = mean max_k P(next token = k | belief). Both
    average out the token draw, so their gap has far less noise than hit rates."""
    probabilities = next_token_probabilities(hmm, beliefs)
    chosen = np.take_along_axis(probabilities, actions[..., None].astype(np.int64), axis=-1)
    return {"greedy": float(chosen.mean()), "bayes_optimal": float(probabilities.max(-1).mean())}


def bayes_guess(hmm: HMMModel, beliefs: np.ndarray) -> np.ndarray:
    """The Bayes-optimal guess of the next token at each belief (ties: the lowest token)."""
    return next_token_probabilities(hmm, beliefs).argmax(-1)


def _value(report: Mapping[str, Any] | None, *path: str) -> float | None:
    for key in path:
        report = report.get(key) if isinstance(report, Mapping) else None
    return report.get("value") if isinstance(report, Mapping) else None


def _collector(plan: ProbeBudget, seed: int) -> Any:
    """Greedy rollouts of a module on the probe episodes of a run with this seed."""
    return functools.partial(
        collect_rollouts,
        make_env=_probe_env,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        warmup_steps=plan.warmup_steps,
        seed=seed,
        target=info_target("belief"),
        num_envs=min(plan.probe_episodes, 64),
        representation=residual_reader,
        policy="greedy",
    )


def _probe(features: np.ndarray, rollouts: Any, plan: ProbeBudget, seed: int) -> Any:
    """The affine probe from `features` to the exact belief: held-out R², globally and
    within branches of equal last BRANCH_K tokens (the window is one-hot, newest first)."""
    return evaluate_probe(
        features,
        rollouts.targets,
        ProbeSettings(
            seed=seed,
            ridge=PROBE_RIDGE,
            test_fraction=PROBE_TEST_FRACTION,
            n_bootstrap=plan.n_bootstrap,
            branch_depth=BRANCH_K,
        ),
        target_names=BELIEF_NAMES,
        branch_tokens=rollouts.observations[..., :N_TOKENS],
    )


def window_control(spec: Any, plan: ProbeBudget, seed: int) -> dict[str, float | None]:
    """The simplest competitor to the network: the same affine probe from the raw input
    itself (the TOKEN_WINDOW-token one-hot window, no network) to the exact belief, on the
    probe episodes a run of this seed probes. `spec` (the leaf's RLModuleSpec) builds a
    fresh module only to drive the rollout: the process is passive and the episodes are
    seeded, so the tokens and beliefs are those every checkpoint of the run saw."""
    env = _probe_env(1)
    spec = dataclasses.replace(
        spec, observation_space=env.single_observation_space, action_space=env.single_action_space
    )
    env.close()
    torch.manual_seed(seed)
    rollouts = _collector(plan, seed)(spec.build())
    report = _probe(rollouts.observations, rollouts, plan, seed).report.to_dict()
    return {
        "r2": _value(report, "r2_pooled"),
        "r2_within_branch": _value(report, "within_branch", "r2_pooled"),
    }


def analyze(
    context: RunContext,
    *,
    label: str,
    plan: ProbeBudget,
    training_curve: TrainingCurve,
) -> dict[str, Any]:
    """Probe this run's own checkpoints (step 0 and the log-spaced ones, `probe_points`);
    write probe_metrics.json, fractal.png and learning_curve.png into the results folder.

    `plan` is the leaf's Budget (recorded whole), `training_curve` its training metric (the
    learning curve's third panel).
    """
    started = time.perf_counter()
    run = RunArtifacts.open(context.results_dir)
    hmm = model()
    exact = ceilings()
    collect = _collector(plan, context.seed)
    points, reference_obs, snapshots = [], None, {}
    for checkpoint in probe_points(run):
        iteration = checkpoint.iteration
        module = load_module(checkpoint.path)
        rollouts = collect(module)
        if reference_obs is None:
            reference_obs = rollouts.observations
        elif not np.array_equal(rollouts.observations, reference_obs):
            raise RuntimeError("probe episodes differ between checkpoints: the env is not passive")
        names = residual_names(module)
        width = rollouts.representations.shape[-1] // len(names)
        depth = {name: slice(i * width, (i + 1) * width) for i, name in enumerate(names)}

        main = _probe(
            rollouts.representations[..., depth[REPRESENTATION]], rollouts, plan, context.seed
        )
        accuracy = expected_accuracy(hmm, rollouts.targets, rollouts.actions)
        point = {
            "iteration": iteration,
            "env_steps": checkpoint.env_steps,
            "source": str(checkpoint.path),
            "greedy_accuracy": accuracy["greedy"],
            "greedy_hit_rate": rollouts.mean_reward_per_step(),
            "bayes_optimal_same_steps": accuracy["bayes_optimal"],
            "fraction_of_bayes_optimal": accuracy["greedy"] / accuracy["bayes_optimal"],
            "r2": _value(main.report.to_dict(), "r2_pooled"),
            "r2_within_branch": _value(main.report.to_dict(), "within_branch", "r2_pooled"),
            "probe": main.report.to_dict(),
        }
        points.append(point)
        test_beliefs = rollouts.targets[main.test_episodes].reshape(-1, 3)
        snapshots[iteration] = (test_beliefs, main.test_predictions.reshape(-1, 3), point)
        last_rollouts, last_depth = rollouts, depth
    # Every depth of the residual stream at the last checkpoint (pre and post final norm).
    by_depth = {}
    for name, columns in last_depth.items():
        report = _probe(
            last_rollouts.representations[..., columns], last_rollouts, plan, context.seed
        ).report.to_dict()
        by_depth[name] = {
            "r2": _value(report, "r2_pooled"),
            "r2_within_branch": _value(report, "within_branch", "r2_pooled"),
        }

    rows = run.metrics()
    final = rows[-1] if rows else {}
    record = {
        "schema_version": PROBE_SCHEMA_VERSION,
        "recipe": label,
        "process": {"model": MODEL, "x": X, "alpha": ALPHA, "task": TASK},
        "token_window": TOKEN_WINDOW,
        "episode_length": EPISODE_LENGTH,
        "budget": dataclasses.asdict(plan),
        "env_steps": final.get(STEPS_KEY),
        "training_iterations": final.get(ITERATION_KEY),
        "training_wall_time_s": (run.summary or {}).get("wall_time_s"),
        "representation": "post-final-norm residual at the newest position (encode)",
        "target": "info['belief']: P(hidden state now | every token of the episode so far)",
        "branch_k": BRANCH_K,
        "n_episodes": last_rollouts.n_episodes,
        "ceilings": exact,
        "checkpoints": points,
        "final_by_depth": by_depth,
        "policy_readouts": policy_readouts(
            {"greedy": last_rollouts, "sampled": collect(module, policy="sample")},
            functools.partial(bayes_guess, hmm),
            n_actions=N_TOKENS,
            reference_value={"value": exact["bayes_optimal_accuracy"]},
        ),
    }
    plot_fractal(context.results_dir / "fractal.png", hmm, snapshots, label)
    plot_training(
        context.results_dir / "learning_curve.png", points, rows, exact, training_curve, label
    )
    # The memory yardstick and its baselines (yardstick.py, issue 37): yardstick.json.
    from experiments.mess3_token_guess import yardstick  # here: it imports this module

    record["yardstick"] = yardstick.headline(
        yardstick.measure(
            context.results_dir,
            plan=plan,
            seed=context.seed,
            label=label,
            module=module,
            rollouts=last_rollouts,
        )
    )
    record["analysis_wall_time_s"] = round(time.perf_counter() - started, 3)
    write_json(context.results_dir / "probe_metrics.json", record)
    return record


# ---------------------------------------------------------------------------- stages


def write_result(context: RunContext) -> dict[str, Any]:
    """The `result` stage: result.json (`summary`) from the run's probe_metrics.json; its
    iterations are the last metrics row's (the trainer's count, what run_algorithm returns)."""
    record = json.loads((context.results_dir / "probe_metrics.json").read_text(encoding="utf-8"))
    result = summary(record["training_iterations"], record).to_json()
    write_json(context.results_dir / "result.json", result)
    return result


def stages(*, label: str, training_curve: Callable[[], TrainingCurve]) -> tuple[AnalysisStage, ...]:
    """A training leaf's ANALYSIS_STAGES: `analysis` (`analyze` on every recorded
    checkpoint; `training_curve()` is built when it runs: its references are the exact
    ceilings, computed then, not on import) then `result` (result.json from its record).
    The leaf's run() calls them after training (`run_stages`); `rl-harness analyze LEAF RUN`
    calls the same on a finished run."""

    def run_analysis(context: RunContext) -> dict[str, Any]:
        return analyze(context, label=label, plan=context.settings, training_curve=training_curve())

    return (
        AnalysisStage(
            "analysis",
            run_analysis,
            reads=("metrics.jsonl",),
            writes=("probe_metrics.json", "yardstick.json", "fractal.png", "learning_curve.png"),
        ),
        AnalysisStage(
            "result",
            write_result,
            reads=("probe_metrics.json",),
            checkpoints=False,
            writes=("result.json",),
        ),
    )


# ---------------------------------------------------------------------------- plots


def plot_fractal(path: Path, hmm: HMMModel, snapshots: Mapping[int, tuple], label: str) -> Path:
    """fractal.png: the exact MSP at depth TOKEN_WINDOW (area = probability), then the
    probe's predictions on held-out steps at step 0 and at the last checkpoint, coloured
    by the exact belief they should be."""
    from matplotlib.figure import Figure

    msp = mixed_state_presentation(hmm, TOKEN_WINDOW)
    layer = msp.layers[TOKEN_WINDOW]
    fig = Figure(figsize=(15, 4.8))
    axes = fig.subplots(1, 3)
    mixed_state_scatter(
        layer.beliefs,
        layer.probabilities,
        ax=axes[0],
        max_size=30.0,
        min_size=0.3,
        title=f"exact beliefs after {TOKEN_WINDOW} tokens (MSP)",
    )
    first, last = min(snapshots), max(snapshots)
    for ax, iteration in zip(axes[1:], (first, last), strict=True):
        true, predicted, point = snapshots[iteration]
        r2 = point["r2"]
        simplex_scatter(
            ax,
            predicted,
            colors=np.clip(true, 0.0, 1.0),
            size=1.5,
            title=(
                f"probe at {point['env_steps']:,} env steps (R² "
                f"{'undefined' if r2 is None else f'{r2:.3f}'})"
            ),
        )
    fig.suptitle(f"{label}: MESS3 (x {X}, alpha {ALPHA}), probe of the post-final-norm residual")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def plot_training(
    path: Path,
    points: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    exact: Mapping[str, float],
    training_curve: TrainingCurve,
    label: str,
) -> Path:
    """learning_curve.png: greedy accuracy and probe R² at the checkpoints (env steps,
    step 0 drawn at 1 on the log axis), and the leaf's training metric per iteration."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.2))
    axes = fig.subplots(1, 3)
    x = np.array([max(p["env_steps"], 1) for p in points], dtype=np.float64)
    axes[0].plot(
        x, [p["greedy_accuracy"] for p in points], "o-", label="greedy (exact given belief)"
    )
    for index, (key, text) in enumerate(
        (
            ("bayes_optimal_accuracy", "Bayes-optimal (10 tokens)"),
            ("newest_token_accuracy", "newest token only"),
        )
    ):
        axes[0].axhline(exact[key], ls="--", lw=1, color=f"C{index + 1}", label=text)
    axes[0].set_ylabel("next-token accuracy")
    axes[1].plot(
        x, [p["r2"] if p["r2"] is not None else np.nan for p in points], "o-", label="global"
    )
    axes[1].plot(
        x,
        [p["r2_within_branch"] if p["r2_within_branch"] is not None else np.nan for p in points],
        "s-",
        label=f"within branches (last {BRANCH_K} tokens)",
    )
    axes[1].set_ylabel("probe R² (held out)")
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_xlabel("env steps (step 0 at 1)")
    key, per = training_curve.key, training_curve.per
    curve = [
        (row[STEPS_KEY], row[key] / (row[per] if per else 1.0))
        for row in rows
        if row.get(key) is not None and row.get(STEPS_KEY) and (per is None or row.get(per))
    ]
    if curve:
        xs, ys = np.asarray(curve, dtype=np.float64).T
        axes[2].plot(xs, ys, "o-", ms=3, label=key.rsplit("/", 1)[-1])
    else:
        axes[2].text(0.5, 0.5, f"no values of {key}", ha="center", transform=axes[2].transAxes)
    for index, (text, value) in enumerate(training_curve.references.items()):
        axes[2].axhline(value, ls="--", lw=1, color=f"C{index + 1}", label=text)
    axes[2].set_xlabel("env steps")
    axes[2].set_ylabel(training_curve.label)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"{label}: MESS3 token guess (x {X}, alpha {ALPHA}, {TOKEN_WINDOW}-token window)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


# ---------------------------------------------------------------------------- summary


def summary(iterations: int | None, record: Mapping[str, Any]) -> Results:
    """result.json: the run's headline metrics, each named once (the keys result.json had
    before named metrics). The probe over training stays in probe_metrics.json
    (`checkpoints`; `compare --metric probe_metrics.json:checkpoints[-1]/r2` reads it)."""
    points = record["checkpoints"]
    last = points[-1]
    # A resumed run has no step-0 checkpoint: its step-0 fields are None, not its first probe.
    first = points[0] if points[0]["iteration"] == 0 else {}
    out = Results()
    out.add("iterations", iterations)
    out.add("env_steps", record["env_steps"])
    out.add("bayes_optimal_accuracy", record["ceilings"]["bayes_optimal_accuracy"])
    out.add("newest_token_accuracy", record["ceilings"]["newest_token_accuracy"])
    out.add("greedy_accuracy", last["greedy_accuracy"])
    out.add("fraction_of_bayes_optimal", last["fraction_of_bayes_optimal"])
    out.add("probe_r2", last["r2"])
    out.add("probe_r2_within_branch", last["r2_within_branch"])
    out.add("step0_greedy_accuracy", first.get("greedy_accuracy"))
    out.add("step0_probe_r2", first.get("r2"))
    out.add("step0_probe_r2_within_branch", first.get("r2_within_branch"))
    out.add("training_wall_time_s", record["training_wall_time_s"])
    out.add("analysis_wall_time_s", record["analysis_wall_time_s"])
    return out

"""MESS3 next-token prediction: the process, the env config and the analysis both leaves share.

The budgets, the agent and PPO are in spec.py; this module holds the MESS3 process and task,
and the analysis, so that the leaves' probes compare. The analysis asks whether the trained
agent's GRU state holds the exact Bayesian belief over the hidden state: an affine probe
from the GRU's hidden state (`module.encode`) to the belief reported by the env, scored on
held-out episodes with bootstrap intervals over episodes. Controls: the same probe on the
raw observation (what the newest token alone gives) and on an untrained module of the same
architecture.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Protocol

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec

from rl_harness import (
    ENV_STEPS_KEY,
    ITERATION_KEY,
    RETURN_KEY,
    Results,
    RunContext,
    RunResult,
    learner_key,
    write_json,
)
from rl_harness.analysis import (
    ProbeSettings,
    RunArtifacts,
    collect_rollouts,
    evaluate_probe,
    info_target,
    load_module,
    plot_belief_simplex,
    plot_learning_curve,
)
from rl_harness.envs.hmm import HMMModel, HMMVectorEnv, next_token_probabilities
from rl_harness.envs.mess3 import bayes_optimal_next_token_reward, mess3_model
from rl_harness.seeding import stream_seed

# The process (explicit: libraries default to other values).
X = 0.05
ALPHA = 0.85
EPISODE_LENGTH = 64
TOKEN_WINDOW = 1  # the newest token only: history is the agent's job
MODEL = "rl_harness.envs.mess3:mess3_model"
TASK = "rl_harness.envs.mess3.tasks:NextTokenTask"

# The probe.
PROBE_RIDGE = 0.0
PROBE_TEST_FRACTION = 0.25
BELIEF_NAMES = ["belief_state_0", "belief_state_1", "belief_state_2"]
AUX_ACCURACY_KEY = learner_key("next_token_aux/accuracy")


class ProbeBudget(Protocol):
    """The part of the study's Budget (spec.py) the analysis reads."""

    probe_episodes: int  # episodes rolled out for the probe (a quarter held out for scoring)
    n_bootstrap: int  # bootstrap resamples of the held-out episodes for each interval


def env_config(info: list[str]) -> dict[str, Any]:
    """The MESS3 next-token env (`rl_harness.envs.hmm.ENV_ID`); `info`: the info keys it fills."""
    return {
        "model": MODEL,
        "model_kwargs": {"x": X, "alpha": ALPHA},
        "task": TASK,
        "episode_length": EPISODE_LENGTH,
        "token_window": TOKEN_WINDOW,
        "info": info,
    }


def model() -> HMMModel:
    return mess3_model(x=X, alpha=ALPHA)


def memoryless_reward(hmm: HMMModel, episode_length: int) -> float:
    """Expected reward per step of the best policy that sees only the newest token.

    Exact from the token matrices: with the initial distribution stationary (MESS3's is
    uniform), P(token k then j) = pi T(k) T(j) 1 at every step after the first.
    """
    pi, tokens = hmm.initial, hmm.token_matrices
    first = np.einsum("i,kij->k", pi, tokens)  # P(first token = k)
    after = np.einsum("i,kij,mjl->km", pi, tokens, tokens)  # P(k, then m)
    return float((first.max() + (episode_length - 1) * after.max(axis=1).sum()) / episode_length)


def expected_rewards(hmm: HMMModel, beliefs: np.ndarray, actions: np.ndarray) -> dict[str, float]:
    """Expected reward per step on recorded episodes, exact given each step's belief.

    `agent`: mean P(next token = the agent's action | belief); `bayes_optimal`: mean
    max_k P(next token = k | belief) on the same steps. Both average out the token draw,
    so their gap (the agent's regret on these episodes) has far less noise than hit rates.
    """
    probabilities = next_token_probabilities(hmm, beliefs)  # (E, T, n_tokens)
    chosen = np.take_along_axis(probabilities, actions[..., None].astype(np.int64), axis=-1)
    return {"agent": float(chosen.mean()), "bayes_optimal": float(probabilities.max(-1).mean())}


def _probe_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, env_config(["belief"]))


def untrained_module(spec: RLModuleSpec, seed: int) -> RLModule:
    """The same architecture with fresh, seeded weights: a control for the probe."""
    env = _probe_env(1)
    spec = dataclasses.replace(
        spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def _probe(rollouts: Any, features: np.ndarray, context: RunContext, plan: ProbeBudget) -> Any:
    return evaluate_probe(
        features,
        rollouts.targets,
        ProbeSettings(
            seed=context.seed,
            ridge=PROBE_RIDGE,
            test_fraction=PROBE_TEST_FRACTION,
            n_bootstrap=plan.n_bootstrap,
        ),
        target_names=BELIEF_NAMES,
    )


def analyze(
    context: RunContext,
    *,
    label: str,
    module_spec: RLModuleSpec,
    aux_weight: float,
    plan: ProbeBudget,
) -> dict[str, Any]:
    """Probe the trained agent of this run; write probe_metrics.json and the two plots.

    `module_spec` is the leaf's (for the untrained control), `aux_weight` its next-token
    loss weight (0 without one), `plan` its Budget (recorded whole).
    """
    run = RunArtifacts.open(context.results_dir)
    checkpoint = run.final_checkpoint()
    started = time.perf_counter()
    module = load_module(checkpoint)  # module only: no env runners, no learner
    collect = functools.partial(
        collect_rollouts,
        make_env=_probe_env,
        n_episodes=plan.probe_episodes,
        episode_steps=EPISODE_LENGTH,
        seed=context.seed,
        target=info_target("belief"),
        num_envs=min(plan.probe_episodes, 64),
    )
    rollouts = collect(module)
    agent = _probe(rollouts, rollouts.representations, context, plan)
    observation = _probe(rollouts, rollouts.observations, context, plan)
    untrained_rollouts = collect(
        untrained_module(module_spec, stream_seed(context.seed, "study", "untrained_module"))
    )
    untrained = _probe(untrained_rollouts, untrained_rollouts.representations, context, plan)

    hmm = model()
    bayes = bayes_optimal_next_token_reward(hmm, episode_length=EPISODE_LENGTH)
    expected = expected_rewards(hmm, rollouts.targets, rollouts.actions)
    final = run.metrics()[-1] if run.metrics() else {}
    training_return = final.get(RETURN_KEY)
    record = {
        "recipe": label,
        "process": {"model": MODEL, "x": X, "alpha": ALPHA, "task": TASK},
        "episode_length": EPISODE_LENGTH,
        "token_window": TOKEN_WINDOW,
        "aux_weight": aux_weight,
        "budget": dataclasses.asdict(plan),
        "checkpoint": str(checkpoint),
        "env_steps": final.get(ENV_STEPS_KEY),
        "training_iterations": final.get(ITERATION_KEY),
        "training_wall_time_s": (run.summary or {}).get("wall_time_s"),
        "representation": "GRU hidden state after each step (module.encode)",
        "n_episodes": rollouts.n_episodes,
        "probe": agent.report.to_dict(),
        "controls": {
            "observation_probe": observation.report.to_dict(),
            "untrained_module_probe": untrained.report.to_dict(),
        },
        "reward_per_step": {
            "bayes_optimal": bayes,
            "memoryless_optimal": memoryless_reward(hmm, EPISODE_LENGTH),
            "uniform_guess": 1.0 / hmm.n_tokens,
            # On the probe episodes (greedy actions): realized hits, and exact expectations.
            "agent_greedy": rollouts.mean_reward_per_step(),
            "agent_greedy_expected": expected["agent"],
            "bayes_optimal_same_episodes": expected["bayes_optimal"],
            "agent_training": (
                training_return / EPISODE_LENGTH if training_return is not None else None
            ),
        },
    }
    test_beliefs = rollouts.targets[agent.test_episodes].reshape(-1, 3)
    r2 = agent.report.r2_pooled
    plot_belief_simplex(
        context.results_dir / "belief_simplex.png",
        test_beliefs,
        agent.test_predictions.reshape(-1, 3),
        title=f"{label}: held-out episodes, probe R² {r2.value:.3f} [{r2.low:.3f}, {r2.high:.3f}]",
        labels=("exact belief (from env info)", "affine probe of the GRU state"),
    )
    rewards = record["reward_per_step"]
    references = {
        RETURN_KEY: {
            "Bayes-optimal": rewards["bayes_optimal"] * EPISODE_LENGTH,
            "newest-token optimal": rewards["memoryless_optimal"] * EPISODE_LENGTH,
        }
    }
    if aux_weight:  # the head's accuracy has the same ceiling as the reward per step
        references[AUX_ACCURACY_KEY] = {"Bayes-optimal": rewards["bayes_optimal"]}
    plot_learning_curve(
        context.results_dir / "learning_curve.png",
        run.metrics(),
        y_keys=list(references),
        references=references,
        title=f"{label}: MESS3 next-token task (x={X}, alpha={ALPHA})",
    )
    record["analysis_wall_time_s"] = round(time.perf_counter() - started, 3)
    write_json(context.results_dir / "probe_metrics.json", record)
    return record


def summary(result: RunResult, record: dict[str, Any]) -> Results:
    """result.json: the run's headline metrics, each named once (the keys result.json had
    before named metrics, "/" for a group); probe_metrics.json stays the full record."""
    out = Results()
    out.add("iterations", result.iterations)
    out.add("env_steps", record["env_steps"])
    out.add("probe_r2_pooled", record["probe"]["r2_pooled"])
    for name, value in record["reward_per_step"].items():
        out.add(f"reward_per_step/{name}", value)
    out.add("analysis_wall_time_s", record["analysis_wall_time_s"])
    return out

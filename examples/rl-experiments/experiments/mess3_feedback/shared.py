"""MESS3 feedback study: the process, the env, the exact ceilings and the analysis.

The process (the client's feedback study, ported): MESS3 (x 0.05, alpha 0.85). The agent
guesses the token of the coming move; its guess a tilts the move, U_a = 0.9 T + 0.1 R_a
with R_a[i, j] = 1[j == a] (`GuessFeedbackTask`, feedback 0.1); reward 1 for a correct
guess. Timing: the original's, the token drawn from the state the process leaves
(`emission="on_leave"`): the guess cannot change the token it guesses, only the states
after it. (This library's MESS3 emits on entering; that is a different problem, with
Bayes-optimal accuracy 0.7105 instead of 0.6996: docs/migrating.md.) The agent sees the
last WINDOW (token, previous action) pairs: the env's token and action windows read as
positions by name (`dict_observation` + the transformer's `window_keys`).

Ceilings (`ceilings`): the one-step Bayes-optimal guesser (`OneStepLookaheadPolicy`, fed
the exact belief) run in the env: its accuracy (the gamma-0 optimum: PPO here has gamma 0);
and per recorded step of the agent's own rollouts, the Bayes-optimal accuracy at the
beliefs the agent visited and the exact chance of its own guesses (`score_rollouts`).

Analysis (`analyze_module`, at every checkpoint on its own greedy rollouts and at the
last one in full): an affine probe of the post-final-norm residual for the exact belief
(globally, within branches of equal last 3 tokens: each step's code is its newest
BRANCH_K tokens and the probe groups the codes of the last BRANCH_K steps; with a
permutation null);
controls scored on the same episodes: the step-0 checkpoint (untrained weights), the
previous-action input ablated (masked, shuffled: every step, so the window holds only
corrupted actions) both replayed (probe) and in closed loop (accuracy); the counterfactual
of the previous action (decoded against exact belief shift); agreement with the Bayes
guesser (greedy, sampled); the library's policy read-outs against the guesser
(`readouts`: action fractions overall, by hidden state and by belief argmax, agreement, on the
agent's greedy and sampled play, beside the guesser's closed-loop value); the memory
yardstick (`window_filter_controls`: the exact filter of the last m pairs, probed the same
way).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
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
    ProbeSettings,
    Rollouts,
    RunArtifacts,
    ablate_rollouts,
    ablation_preprocess,
    action_agreement,
    collect_rollouts,
    evaluate_probe,
    info_target,
    input_counterfactual,
    policy_readouts,
    probe_checkpoints,
    probe_checkpoints_closed_loop,
    replay_rollouts,
    run_checkpoints,
    swap_one_hot,
)
from rl_harness.envs.hmm import HMMVectorEnv, split_observation
from rl_harness.envs.hmm.action_tasks import (
    OneStepLookaheadPolicy,
    closed_loop_value,
    counterfactual_beliefs,
    expected_rewards,
    window_pair_beliefs,
)

# The process (explicit: libraries default to other values).
X = 0.05
ALPHA = 0.85
FEEDBACK = 0.1
EMISSION = "on_leave"  # the original study's timing
N_TOKENS = 3
WINDOW = 10  # (token, previous action) positions the agent sees: the paper's context
EPISODE_LENGTH = 1024  # the original env's default
MODEL = "rl_harness.envs.mess3:mess3_model"
TASK = "rl_harness.envs.hmm.action_tasks:GuessFeedbackTask"
KNOWN_BAYES_ACCURACY = 0.6996  # design notes: emit on leaving, 1024-step episodes

# The probe.
WINDOW_FILTERS = (1, 2, 3, WINDOW)  # memory yardsticks: exact filters of the last m pairs
# Each step's branch code: its newest BRANCH_K tokens; the probe groups by the codes of the
# last BRANCH_K steps, so a branch is the last BRANCH_K + 1 = 3 tokens (report.branch_depth).
BRANCH_K = 2
PROBE_RIDGE = 1e-6
BELIEF_NAMES = ["belief_state_0", "belief_state_1", "belief_state_2"]
STREAM = ("mess3_feedback",)


def env_config(*, dict_observation: bool, info: Sequence[str] = ()) -> dict[str, Any]:
    """The env of every leaf and of the analysis: the training env reads the windows as a
    Dict; the analysis records the same observation flat and splits it for the module."""
    return {
        "model": MODEL,
        "model_kwargs": {"x": X, "alpha": ALPHA},
        "task": TASK,
        "task_kwargs": {"emission": EMISSION, "feedback": FEEDBACK},
        "episode_length": EPISODE_LENGTH,
        "token_window": WINDOW,
        "action_window": WINDOW,
        "observation_delay": 0,
        "dict_observation": dict_observation,
        "info": list(info),
    }


ANALYSIS_ENV = env_config(dict_observation=False, info=["decision_belief"])
# The policy read-outs' env: the same episodes, with the hidden state at each decision too.
READOUT_ENV = env_config(dict_observation=False, info=["decision_belief", "state"])


def analysis_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, ANALYSIS_ENV)


_REFERENCE = analysis_env(1)
LAYOUT = _REFERENCE.layout
PARTS = _REFERENCE.parts
TASK_OBJECT = _REFERENCE.task


def module_obs(flat: np.ndarray) -> dict[str, np.ndarray]:
    """The recorded flat observation as the Dict the module reads."""
    return split_observation(flat, PARTS)


def checkpoint_schedule() -> CheckpointSchedule:
    """Step 0 (untrained: the control), iterations 1, 2, 4, ... and the last."""
    return CheckpointSchedule(at_start=True, log_base=2.0, log_first=1.0, log_unit="iterations")


def ceilings(n_copies: int, n_steps: int, seed: int) -> dict[str, float]:
    """The Bayes guesser's accuracy in this env (1024-step episodes from the stationary
    start, exact expected reward per step; `n_steps` should cover whole episodes)."""
    oracle = OneStepLookaheadPolicy(TASK_OBJECT, "reward")
    value = closed_loop_value(ANALYSIS_ENV, oracle, n_copies=n_copies, n_steps=n_steps, seed=seed)
    return {
        "bayes_optimal_accuracy": value.value,
        "bayes_optimal_accuracy_se": value.standard_error,
        "bayes_optimal_accuracy_known": KNOWN_BAYES_ACCURACY,
    }


def score_rollouts(rollouts: Rollouts) -> dict[str, float]:
    """Per recorded step of the agent's own rollouts: realized accuracy, the exact chance
    of its guesses, and the Bayes-optimal accuracy at the beliefs it visited."""
    values = expected_rewards(TASK_OBJECT, rollouts.targets)  # (E, T, n_actions)
    chosen = np.take_along_axis(values, rollouts.actions[..., None].astype(int), axis=-1)
    return {
        "accuracy": rollouts.mean_reward_per_step(),
        "exact_accuracy": float(chosen.mean()),
        "bayes_optimal_same_steps": float(values.max(axis=-1).mean()),
    }


def branch_codes(rollouts: Rollouts) -> np.ndarray:
    """(E, T, BRANCH_K) the newest BRANCH_K visible tokens of each step (-1 before any)."""
    window = rollouts.observations[..., LAYOUT.tokens].reshape(
        *rollouts.observations.shape[:2], WINDOW, N_TOKENS
    )
    codes = np.where(window.sum(-1) > 0, window.argmax(-1), -1)
    return codes[..., :BRANCH_K]


def window_codes(rollouts: Rollouts) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, actions) (E, T, WINDOW) codes of the visible window, newest first, -1 empty."""
    lead = rollouts.observations.shape[:2]
    out = []
    for part in (LAYOUT.tokens, LAYOUT.actions):
        one_hot = rollouts.observations[..., part].reshape(*lead, WINDOW, N_TOKENS)
        out.append(np.where(one_hot.sum(-1) > 0, one_hot.argmax(-1), -1))
    return out[0], out[1]


def window_filter_controls(rollouts: Rollouts, plan: Any, seed: int) -> dict[str, Any]:
    """The memory yardstick, scored like the agent: the probe of the exact belief of a filter
    that sees only the last m (token, action) pairs (from the stationary law), for each m
    in WINDOW_FILTERS. m = WINDOW is what the agent's own window allows at best."""
    tokens, actions = window_codes(rollouts)
    initial = _REFERENCE.model.initial
    out = {}
    for m in WINDOW_FILTERS:
        beliefs = window_pair_beliefs(TASK_OBJECT, tokens[..., :m], actions[..., :m], initial)
        out[f"m{m}"] = _probe(beliefs, rollouts, plan, seed).report.to_dict()
    return out


def collect(module: RLModule, plan: Any, seed: int, *, ablation: str | None = None) -> Rollouts:
    """The module's own greedy rollouts (same episode seeds for every module)."""
    preprocess = module_obs
    if ablation is not None:
        corrupt = ablation_preprocess(LAYOUT.actions, ablation, seed=seed)  # type: ignore[arg-type]

        def preprocess(flat: np.ndarray) -> dict[str, np.ndarray]:
            return module_obs(corrupt(flat))

    return collect_rollouts(
        module,
        analysis_env,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        warmup_steps=plan.warmup_steps,
        seed=seed,
        num_envs=plan.num_envs,
        target=info_target("decision_belief"),
        preprocess=preprocess,
        stream=(*STREAM, "rollouts"),
    )


def readout_rollouts(module: RLModule, plan: Any, seed: int, policy: str) -> Rollouts:
    """The module's own rollouts on the probe episodes (`collect`'s seeds and sizes) under
    `policy` ("greedy" or "sample"), targets: the decision belief, then info['state'] (the
    hidden state at the decision) in the last column."""
    return collect_rollouts(
        module,
        lambda n: HMMVectorEnv(n, READOUT_ENV),
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        warmup_steps=plan.warmup_steps,
        seed=seed,
        num_envs=plan.num_envs,
        target=info_target("decision_belief", "state"),
        preprocess=module_obs,
        stream=(*STREAM, "rollouts"),
        policy=policy,  # type: ignore[arg-type]
    )


def readouts(module: RLModule, plan: Any, seed: int, reference_value: Mapping[str, float]):
    """The library's policy read-outs against the Bayes guesser (`OneStepLookaheadPolicy` of
    the exact belief) on the module's greedy and sampled play: action fractions overall, by
    hidden state and by belief argmax, agreement, and the guesser's own closed-loop value."""
    sets, states = {}, {}
    for name, policy in (("greedy", "greedy"), ("sampled", "sample")):
        rollouts = readout_rollouts(module, plan, seed, policy)
        sets[name] = dataclasses.replace(rollouts, targets=rollouts.targets[..., :N_TOKENS])
        states[name] = rollouts.targets[..., N_TOKENS].astype(np.int64)
    return policy_readouts(
        sets,
        OneStepLookaheadPolicy(TASK_OBJECT, "reward"),
        n_actions=N_TOKENS,
        hidden_states=states,
        reference_value=reference_value,
    )


def probe_settings(plan: Any, seed: int, n_permutations: int = 0) -> ProbeSettings:
    """The study's probe protocol: one record for every probe of a run."""
    return ProbeSettings(
        seed=seed,
        ridge=PROBE_RIDGE,
        n_bootstrap=plan.n_bootstrap,
        branch_depth=BRANCH_K,
        n_permutations=n_permutations,
        stream=(*STREAM, "probe"),
    )


def _probe(
    representations: np.ndarray, rollouts: Rollouts, plan: Any, seed: int, n_permutations: int = 0
):
    return evaluate_probe(
        representations,
        rollouts.targets,
        probe_settings(plan, seed, n_permutations),
        target_names=BELIEF_NAMES,
        branch_tokens=branch_codes(rollouts),
    )


def counterfactual(module: RLModule, rollouts: Rollouts, probe: Any) -> dict[str, float]:
    """Swap the newest previous action; decoded vs exact belief shift (step 0 of each
    recorded episode is left out: its previous belief is not recorded)."""
    newest = slice(LAYOUT.actions.start, LAYOUT.actions.start + N_TOKENS)
    edited, codes, mask = swap_one_hot(rollouts.observations, newest)
    mask[:, 0] = False
    tokens = rollouts.observations[..., LAYOUT.tokens.start : LAYOUT.tokens.start + N_TOKENS]
    previous = np.concatenate([rollouts.targets[:, :1], rollouts.targets[:, :-1]], axis=1)
    exact = counterfactual_beliefs(
        TASK_OBJECT, previous, np.where(mask, codes, 0), tokens.argmax(-1)
    )
    shift = np.where(mask[..., None], exact - rollouts.targets, 0.0)
    report = input_counterfactual(
        module, rollouts, probe, edited, shift, mask, preprocess=module_obs
    )
    return report.to_dict()


def analyze_module(module: RLModule, plan: Any, seed: int) -> dict[str, Any]:
    """Everything the last checkpoint is scored on, with its controls on the same episodes."""
    rollouts = collect(module, plan, seed)
    evaluation = _probe(
        rollouts.representations, rollouts, plan, seed, n_permutations=plan.n_permutations
    )
    record: dict[str, Any] = {
        "scores": score_rollouts(rollouts),
        "probe": evaluation.report.to_dict(),
        "agreement_with_bayes_guesser": action_agreement(
            module,
            rollouts,
            OneStepLookaheadPolicy(TASK_OBJECT, "reward")(rollouts.targets),
            preprocess=module_obs,
        ),
        "counterfactual_previous_action": counterfactual(module, rollouts, evaluation.probe),
        "ablations": {},
        "window_filters": window_filter_controls(rollouts, plan, seed),
    }
    for mode in ("mask", "shuffle"):
        ablated = ablate_rollouts(rollouts, LAYOUT.actions, mode, seed=seed)  # type: ignore[arg-type]
        features = replay_rollouts(module, ablated, preprocess=module_obs)
        closed = collect(module, plan, seed, ablation=mode)
        record["ablations"][mode] = {
            "probe_replayed": _probe(features, rollouts, plan, seed).report.to_dict(),
            "closed_loop_scores": score_rollouts(closed),
        }
    return record


def analyze(context: RunContext, plan: Any) -> dict[str, Any]:
    """Probe every checkpoint on its own rollouts and on the final agent's (fixed replay);
    the full analysis at the last; write probe_metrics.json."""
    from rl_harness.analysis import load_module

    run = RunArtifacts.open(context.results_dir)
    points = [c for c in run_checkpoints(run) if isinstance(c.path, Path)]
    steps = {row.get(ITERATION_KEY): row.get(ENV_STEPS_KEY) for row in run.metrics()}
    pairs = [
        (0 if c.iteration == 0 else int(c.env_steps or steps.get(c.iteration) or 0), c.path)
        for c in points
    ]
    seed = context.seed
    final = load_module(Path(pairs[-1][1]))
    final_record = analyze_module(final, plan, seed)
    settings = probe_settings(plan, seed)
    own = probe_checkpoints_closed_loop(
        pairs,
        lambda module: collect(module, plan, seed),
        settings,
        branch_tokens=branch_codes,
        score=score_rollouts,
    )
    final_rollouts = collect(final, plan, seed)
    replayed = probe_checkpoints(
        pairs,
        final_rollouts,
        settings,
        preprocess=module_obs,
        branch_tokens=branch_codes(final_rollouts),
    )
    ceiling = ceilings(plan.ceiling_copies, EPISODE_LENGTH, seed)
    guesser_value = {
        "value": ceiling["bayes_optimal_accuracy"],
        "standard_error": ceiling["bayes_optimal_accuracy_se"],
    }
    record = {
        "schema_version": 1,
        "process": {
            "model": MODEL,
            "x": X,
            "alpha": ALPHA,
            "task": TASK,
            "emission": EMISSION,
            "feedback": FEEDBACK,
            "window": WINDOW,
        },
        "ceilings": ceiling,
        "final": final_record,
        "policy_readouts": readouts(final, plan, seed, guesser_value),
        "probes": [p.to_dict() for p in own],
        "replay_probes": [p.to_dict() for p in replayed],
    }
    write_json(context.results_dir / "probe_metrics.json", record)
    return record


def summary(iterations: int, record: Mapping[str, Any]) -> Results:
    """result.json: the run's headline metrics, each named once (the keys result.json had
    before named metrics); probe_metrics.json stays the full record."""
    final = record["final"]
    out = Results()
    out.add("iterations", iterations)
    out.add("bayes_optimal_accuracy", record["ceilings"]["bayes_optimal_accuracy"])
    out.add("accuracy", final["scores"]["accuracy"])
    out.add("exact_accuracy", final["scores"]["exact_accuracy"])
    out.add("r2_pooled", final["probe"]["r2_pooled"])
    out.add("checkpoints", len(record["probes"]))
    return out

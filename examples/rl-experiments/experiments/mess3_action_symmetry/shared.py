"""The action-symmetry study's analysis: what the original reported at every checkpoint,
through the library's calls.

At step 0 (the run's own untrained weights) and iterations 1, 2, 4, ... and the last
(`checkpoint_schedule`, the original's "init_then_iterations_1_2_4_8_and_final"), each
checkpoint plays its own greedy rollouts (`collect`: the same episode seeds for every
checkpoint) and is scored on them (`probe_checkpoints_closed_loop`):

- the affine probe (ridge 1e-6) of its post-final-norm residual for the exact belief the
  agent can hold (`info["decision_belief"]`): held-out R², MSE, the best constant's MSE
  (the original's `target_variance`) and the mean-per-branch MSE over branches of equal
  last 2 visible tokens (its `branch_baseline_mse`), with a whole-episode permutation null;
- the occupancy of the rewarded state along its play (the reward per step: the original's
  `reward_state_2_fraction_greedy`) and the library's policy read-outs against the
  one-step oracle (`score`: action fractions overall, by the hidden state at the decision
  and by belief argmax, the oracle's fractions at the same beliefs, agreement).

At the last checkpoint also the read-outs on its sampled play (the original's `policy_*`
figures), beside the oracle's own closed-loop value (`closed_loop_value`: its reward per
step in the same env), and the training curve (return per step per iteration).
`check_before_training` runs the same collection and scores on the untrained module
before any training (`check_closed_loop`), so a mistake fails in seconds.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModule

from experiments.mess3_action_symmetry import task
from experiments.mess3_action_symmetry.spec import Budget
from rl_harness import (
    ENV_STEPS_KEY,
    ITERATION_KEY,
    LENGTH_KEY,
    RETURN_KEY,
    CheckpointSchedule,
    Results,
    RunContext,
    run_algorithm,
    write_json,
)
from rl_harness.analysis import (
    AnalysisStage,
    ProbeSettings,
    Rollouts,
    RunArtifacts,
    check_closed_loop,
    collect_rollouts,
    info_target,
    load_module,
    policy_readouts,
    probe_checkpoints_closed_loop,
    run_checkpoints,
    run_stages,
)
from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.envs.hmm.action_tasks import closed_loop_value

PROBE_RIDGE = 1e-6
PROBE_TEST_FRACTION = 4 / 7  # the original held out 80,000 of 140,000 steps
BRANCH_DEPTH = 2  # the original's branch depth: equal last 2 visible tokens
BELIEF_NAMES = ["belief_state_0", "belief_state_1", "belief_state_2"]
STREAM = ("mess3_action_symmetry",)
PROBE_SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Leaf:
    """What a leaf runs: the variant, the observation delay and its label in the records."""

    label: str
    variant: int
    delay: int


def checkpoint_schedule() -> CheckpointSchedule:
    """Step 0 (the untrained weights), iterations 1, 2, 4, 8, ...; the runners add the last."""
    return CheckpointSchedule(at_start=True, log_base=2.0, log_first=1.0, log_unit="iterations")


def analysis_env(leaf: Leaf) -> dict[str, Any]:
    """The leaf's env with the decision belief and the hidden state in its info; every
    probe episode starts at reset."""
    return task.env_config(
        leaf.variant,
        leaf.delay,
        info=["decision_belief", "state"],
        random_first_episode_length=False,
    )


def collect(module: RLModule, leaf: Leaf, plan: Budget, seed: int, policy: str = "greedy"):
    """The module's own play on the probe episodes (the same seeds for every module):
    targets the decision belief, the hidden state at each decision as a side array."""
    config = analysis_env(leaf)
    return collect_rollouts(
        module,
        lambda n: HMMVectorEnv(n, config),
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        warmup_steps=plan.warmup_steps,
        seed=seed,
        num_envs=plan.probe_envs,
        target=info_target("decision_belief"),
        side={"state": info_target("state")},
        policy=policy,  # type: ignore[arg-type]
        stream=(*STREAM, "rollouts"),
    )


def branch_tokens(rollouts: Rollouts) -> np.ndarray:
    """(E, T, 3) the newest visible token, one-hot (zeros before the first token)."""
    return rollouts.observations[..., : task.N_TOKENS]


def hidden_states(rollouts: Rollouts) -> np.ndarray:
    return rollouts.side["state"][..., 0].astype(np.int64)


def probe_settings(plan: Budget, seed: int) -> ProbeSettings:
    return ProbeSettings(
        seed=seed,
        ridge=PROBE_RIDGE,
        test_fraction=PROBE_TEST_FRACTION,
        n_bootstrap=plan.n_bootstrap,
        branch_depth=BRANCH_DEPTH,
        n_permutations=plan.n_permutations,
        stream=(*STREAM, "probe"),
    )


def scorer(leaf: Leaf):
    """`score(rollouts)` of every checkpoint: the rewarded state's occupancy along its play
    and its read-outs against the one-step oracle."""
    oracle = task.myopic_oracle(leaf.variant)

    def score(rollouts: Rollouts) -> dict[str, Any]:
        readouts = policy_readouts(
            {"greedy": rollouts},
            oracle,
            n_actions=task.N_ACTIONS,
            hidden_states={"greedy": hidden_states(rollouts)},
        )
        return {
            "reward_state_2_fraction": rollouts.mean_reward_per_step(),
            "readouts": readouts["greedy"],
        }

    return score


def untrained_module(config: PPOConfig, leaf: Leaf) -> RLModule:
    """The config's module, built on the env's spaces (its weights from torch's RNG)."""
    env = HMMVectorEnv(1, analysis_env(leaf))
    spec = dataclasses.replace(
        config.rl_module_spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    return spec.build()


def check_before_training(config: PPOConfig, leaf: Leaf, plan: Budget, seed: int) -> None:
    """What the analysis will need, checked on an untrained module before training."""
    check_closed_loop(
        untrained_module(config, leaf),
        lambda module: collect(module, leaf, plan, seed),
        branch_tokens=branch_tokens,
        score=scorer(leaf),
        target_names=BELIEF_NAMES,
    )


def train_and_analyse(
    context: RunContext[Budget],
    leaf: Leaf,
    config: PPOConfig,
    stages: tuple[AnalysisStage, ...],
) -> dict[str, Any]:
    """A leaf's run: the analysis checked on an untrained module, training to the budget's
    iterations (checkpoints on `checkpoint_schedule`), then the leaf's stages; result.json."""
    plan = context.settings  # the chosen budget, --set applied (the harness)
    check_before_training(config, leaf, plan, context.seed)
    run_algorithm(config, context, stop=plan.iterations, checkpoint_schedule=checkpoint_schedule())
    return dict(run_stages(context, stages)["result"].record or {})


def _checkpoints(run: RunArtifacts) -> list[tuple[int, Path]]:
    """(env steps, path) of the run's local checkpoints, oldest first (step 0 counts 0)."""
    steps = {row.get(ITERATION_KEY): row.get(ENV_STEPS_KEY) for row in run.metrics()}
    out = {}
    for checkpoint in run_checkpoints(run):
        if not isinstance(checkpoint.path, Path):
            continue  # a URI: the probe loads modules from local folders
        count = checkpoint.env_steps
        if count is None:
            count = 0 if checkpoint.iteration == 0 else steps.get(checkpoint.iteration)
        out[checkpoint.iteration] = (int(count or 0), checkpoint.path)
    if not out:
        raise RuntimeError(f"run {run.results_dir} has no local checkpoint to probe")
    return [out[iteration] for iteration in sorted(out)]


def training_curve(rows: list[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Per iteration: env steps and the sampled policy's return per step (episode return
    over episode length, RLlib's running means)."""
    return [
        {
            "iteration": row[ITERATION_KEY],
            "env_steps": row[ENV_STEPS_KEY],
            "return_per_step": row[RETURN_KEY] / row[LENGTH_KEY],
        }
        for row in rows
        if row.get(RETURN_KEY) is not None and row.get(LENGTH_KEY)
    ]


def analyze(context: RunContext, leaf: Leaf) -> dict[str, Any]:
    """Probe every recorded checkpoint on its own play; the read-outs of the last on its
    greedy and sampled play beside the oracle's value; write probe_metrics.json."""
    plan: Budget = context.settings
    seed = context.seed
    run = RunArtifacts.open(context.results_dir)
    pairs = _checkpoints(run)
    probes = probe_checkpoints_closed_loop(
        pairs,
        lambda module: collect(module, leaf, plan, seed),
        probe_settings(plan, seed),
        branch_tokens=branch_tokens,
        score=scorer(leaf),
        target_names=BELIEF_NAMES,
    )
    final = load_module(pairs[-1][1])
    played = {
        name: collect(final, leaf, plan, seed, policy)
        for name, policy in (("greedy", "greedy"), ("sampled", "sample"))
    }
    oracle = task.myopic_oracle(leaf.variant)
    value = closed_loop_value(
        analysis_env(leaf),
        oracle,
        n_copies=plan.oracle_copies,
        n_steps=task.EPISODE_LENGTH,
        seed=seed,
    )
    oracle_value = {"value": value.value, "standard_error": value.standard_error}
    try:
        facts: dict[str, float] | None = task.facts(leaf.variant)
    except ValueError:  # variants other than 2 have no threshold in P(s = 2)
        facts = None
    rows = run.metrics()
    last = rows[-1] if rows else {}
    record = {
        "schema_version": PROBE_SCHEMA_VERSION,
        "leaf": leaf.label,
        "variant": leaf.variant,
        "observation_delay": leaf.delay,
        "process": {
            "model": task.MODEL,
            "alpha": task.ALPHA,
            "start": "uniform",
            "task": task.TASK,
            "log_weights": task.log_weights(leaf.variant),
            "rewarded_state": "left",
        },
        "facts": facts,
        "budget": dataclasses.asdict(plan),
        "env_steps": last.get(ENV_STEPS_KEY),
        "training_iterations": last.get(ITERATION_KEY),
        "training_curve": training_curve(rows),
        "probes": [probe.to_dict() for probe in probes],
        "final": {
            "reward_state_2_fraction": {
                name: rollouts.mean_reward_per_step() for name, rollouts in played.items()
            },
            "policy_readouts": policy_readouts(
                played,
                oracle,
                n_actions=task.N_ACTIONS,
                hidden_states={name: hidden_states(r) for name, r in played.items()},
                reference_value=oracle_value,
            ),
        },
    }
    write_json(context.results_dir / "probe_metrics.json", record)
    return record


def _fraction(block: Mapping[str, Any], group: str, action: int) -> float | None:
    """The share of `action` among the steps of one group (None: the group never occurs)."""
    entry = block.get(group)
    return None if entry is None else entry["fractions"][action]


def summary(record: Mapping[str, Any]) -> Results:
    """result.json: the last checkpoint's figures the README compares with the original's,
    each named once (action shares by action name, noop shares by hidden state)."""
    probes = record["probes"]
    first, last = probes[0], probes[-1]
    readouts = record["final"]["policy_readouts"]
    out = Results(notes={"leaf": record["leaf"]})
    out.add("iterations", record["training_iterations"])
    out.add("env_steps", record["env_steps"])
    for policy in ("greedy", "sampled"):
        block = readouts[policy]
        out.add(
            f"reward_state_2_fraction_{policy}", record["final"]["reward_state_2_fraction"][policy]
        )
        for action, name in enumerate(task.ACTION_NAMES):
            out.add(f"{policy}_action_fraction/{name}", block["fractions"][action])
        out.add(f"oracle_agreement_{policy}", block["agreement"])
        for state in range(3):
            out.add(
                f"{policy}_noop_fraction/state_{state}",
                _fraction(block["by_hidden_state"], str(state), 0),
            )
    out.add("oracle_value", readouts["reference_value"]["value"])
    out.add("probe_r2", last["r2_pooled"]["value"] if last["r2_pooled"] else None)
    out.add("probe_mse", last["mse"])
    out.add("target_variance", last["target_variance"])
    out.add("branch_baseline_mse", last["branch_baseline_mse"])
    out.add("step0_probe_r2", first["r2_pooled"]["value"] if first["r2_pooled"] else None)
    out.add("step0_probe_mse", first["mse"])
    curve = record["training_curve"]
    out.add("final_training_return_per_step", curve[-1]["return_per_step"] if curve else None)
    out.add("checkpoints", len(probes))
    return out


def write_result(context: RunContext) -> dict[str, Any]:
    """The `result` stage: result.json (`summary`) from the run's probe_metrics.json."""
    path = context.results_dir / "probe_metrics.json"
    result = summary(json.loads(path.read_text(encoding="utf-8"))).to_json()
    write_json(context.results_dir / "result.json", result)
    return result


def stages(leaf: Leaf) -> tuple[AnalysisStage, ...]:
    """A leaf's ANALYSIS_STAGES: `analysis` (`analyze` on every recorded checkpoint) then
    `result` (result.json from its record); `rl-harness analyze LEAF RUN` runs the same."""
    return (
        AnalysisStage(
            "analysis",
            lambda context: analyze(context, leaf),
            reads=("metrics.jsonl",),
            writes=("probe_metrics.json",),
        ),
        AnalysisStage(
            "result",
            write_result,
            reads=("probe_metrics.json",),
            checkpoints=False,
            writes=("result.json",),
        ),
    )

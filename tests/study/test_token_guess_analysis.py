"""The token-guess analysis (`shared.analyze`) on a constructed run: one step-0 checkpoint of
a fresh module of the ppo leaf's architecture, probed on a few short episodes. The fraction of
Bayes-optimal is the greedy accuracy over the Bayes-optimal accuracy on the same steps (here
the early steps of each episode, whose Bayes accuracy is far from the stationary 10-token
ceiling), and that Bayes accuracy is max_k P(next token = k | belief) over those steps."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from experiments.mess3_token_guess import shared

from rl_harness.analysis import collect_rollouts, info_target, load_module
from tests.study.test_token_guess_configs import recipe


@dataclasses.dataclass(frozen=True)
class Plan:
    probe_episodes: int = 8
    warmup_steps: int = 0  # record from the first step: beliefs far from stationary
    probe_steps: int = 6
    n_bootstrap: int = 5


def _constructed_run(root, seed):
    """results/r and artifacts/r of a run whose only checkpoint is its step-0 module."""
    results, artifacts = root / "results" / "r", root / "artifacts" / "r"
    results.mkdir(parents=True)
    (results / "summary.json").write_text(json.dumps({"run_id": "r"}))
    checkpoint = artifacts / "checkpoints" / "iter_000000"
    env = shared._probe_env(1)
    spec = dataclasses.replace(
        recipe("ppo").module_spec(),
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    torch.manual_seed(seed)
    spec.build().save_to_path(
        checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy"
    )
    (checkpoint / "rllib_checkpoint.json").write_text("{}")
    row = {"iteration": 0, "env_steps": 0, "path": "checkpoints/iter_000000", "reasons": ["start"]}
    (results / "checkpoints.jsonl").write_text(json.dumps(row) + "\n")
    return results


def test_fraction_of_bayes_optimal_uses_the_same_steps(tmp_path):
    plan, seed = Plan(), 5
    results = _constructed_run(tmp_path, seed)
    context = SimpleNamespace(results_dir=results, seed=seed)
    curve = shared.TrainingCurve("x", None, "x", {"reference": 0.5})
    record = shared.analyze(context, label="ppo", plan=plan, training_curve=curve)
    (point,) = record["checkpoints"]
    assert point["iteration"] == 0
    # The Bayes accuracy on the probe steps, from their beliefs (the same for any module:
    # the process is passive and the episodes seeded), by hand.
    rollouts = collect_rollouts(
        load_module(point["source"]),
        shared._probe_env,
        n_episodes=plan.probe_episodes,
        episode_steps=plan.probe_steps,
        warmup_steps=plan.warmup_steps,
        seed=seed,
        target=info_target("belief"),
        num_envs=plan.probe_episodes,
        policy="greedy",
    )
    next_tokens = rollouts.targets @ shared.model().token_matrices.sum(axis=2).T
    bayes = next_tokens.max(-1).mean()
    greedy = np.take_along_axis(next_tokens, rollouts.actions[..., None], -1).mean()
    assert point["bayes_optimal_same_steps"] == pytest.approx(bayes, rel=1e-12)
    assert point["greedy_accuracy"] == pytest.approx(greedy, rel=1e-12)
    assert point["fraction_of_bayes_optimal"] == pytest.approx(greedy / bayes, rel=1e-12)
    # The case tells the two denominators apart: early steps know less than 10 tokens do.
    ceiling = record["ceilings"]["bayes_optimal_accuracy"]
    assert abs(bayes - ceiling) > 0.02
    assert (results / "probe_metrics.json").is_file()
    # The policy read-outs: agreement with the Bayes guess on the same greedy steps.
    readouts = record["policy_readouts"]
    agree = (rollouts.actions == next_tokens.argmax(-1)).mean()
    assert readouts["greedy"]["agreement"] == pytest.approx(agree, rel=1e-12)
    assert readouts["reference_value"] == {"value": ceiling}
    assert sum(readouts["sampled"]["fractions"]) == pytest.approx(1.0)

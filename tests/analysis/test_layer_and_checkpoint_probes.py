"""Per-layer probes (every residual from one replay) and probes of a run's checkpoints on
the same recorded rollouts (R² against env steps, and its figure)."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pytest

from rl_harness.analysis import (
    ProbeSettings,
    RunArtifacts,
    collect_rollouts,
    evaluate_probe,
    info_target,
    load_module,
    plot_probe_over_training,
    probe_checkpoints,
    probe_layers,
)
from rl_harness.envs.hmm import HMMVectorEnv
from tests.analysis.conftest import ENV_CONFIG, EPISODE_LENGTH
from tests.analysis.test_replay import build, rollouts_of

PROBE = dict(n_bootstrap=30, test_fraction=0.34, branch_depth=1)


def test_probe_layers_probes_every_residual_with_the_agents_split():
    module = build("transformer", seed=0)
    rollouts = rollouts_of(module)
    tokens = rollouts.observations[..., :3]
    settings = ProbeSettings(seed=4, **PROBE)
    layers = probe_layers(module, rollouts, settings, branch_tokens=tokens)
    assert list(layers.reports) == ["embed", "block_1", "block_2", "final_norm"]
    # The last row is the agent's own probe: same representation, split and resamples.
    agent = evaluate_probe(
        rollouts.representations, rollouts.targets, settings, branch_tokens=tokens
    ).report
    assert layers.reports["final_norm"].to_dict() == agent.to_dict()
    table = layers.table()
    assert [row["name"] for row in table] == list(layers.reports)
    assert table[-1]["r2_pooled"] == agent.r2_pooled.to_dict()
    assert table[-1]["within_branch_r2_pooled"] == agent.within_branch.r2_pooled.to_dict()
    assert table[0]["n_features"] == 16


@pytest.fixture(scope="module")
def checkpoint_pairs(tiny_run):
    run = RunArtifacts.open(tiny_run.results_dir)
    steps, _ = run.metric("num_env_steps_sampled_lifetime")
    folders = run.checkpoints()
    assert len(folders) == 2 and len(steps) == 2
    return [(int(s), folder) for s, folder in zip(steps, folders, strict=True)]


def make_env(num_envs: int) -> HMMVectorEnv:
    return HMMVectorEnv(num_envs, ENV_CONFIG)


def test_probe_checkpoints_replays_the_same_rollouts_through_each(checkpoint_pairs, tmp_path):
    final = load_module(checkpoint_pairs[-1][1])
    rollouts = collect_rollouts(
        final,
        make_env,
        n_episodes=8,
        episode_steps=EPISODE_LENGTH,
        seed=2,
        num_envs=4,
        target=info_target("belief"),
    )
    tokens = rollouts.observations
    settings = ProbeSettings(seed=1, **PROBE)
    # Given out of order: the rows come back sorted by env steps.
    probes = probe_checkpoints(checkpoint_pairs[::-1], rollouts, settings, branch_tokens=tokens)
    assert [p.env_steps for p in probes] == [s for s, _ in checkpoint_pairs]
    # The final checkpoint on its own rollouts is exactly the agent's probe.
    agent = evaluate_probe(
        rollouts.representations, rollouts.targets, settings, branch_tokens=tokens
    ).report
    assert probes[-1].r2_pooled == agent.r2_pooled
    assert probes[-1].within_branch_r2_pooled == agent.within_branch.r2_pooled
    assert probes[0].r2_pooled != probes[-1].r2_pooled  # other weights, other features
    # One checkpoint listed twice gives the same numbers at both points.
    twice = probe_checkpoints(
        [(0, checkpoint_pairs[0][1]), (10, checkpoint_pairs[0][1])],
        rollouts,
        settings,
        branch_tokens=tokens,
    )
    assert twice[0].r2_pooled == twice[1].r2_pooled == probes[0].r2_pooled
    assert twice[0].to_dict()["env_steps"] == 0

    series = plot_probe_over_training(
        tmp_path / "r2_over_training.png", twice + probes[1:], title="test"
    )
    assert series["env_steps"] == [0.0, 10.0, float(checkpoint_pairs[-1][0])]
    assert series["r2_pooled"][-1] == agent.r2_pooled.value
    assert matplotlib.image.imread(tmp_path / "r2_over_training.png").shape[0] > 100
    assert np.isfinite(series["within_branch_r2_pooled"][0])

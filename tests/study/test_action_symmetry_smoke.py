"""The action-symmetry study end to end through the real CLI in smoke mode, each leaf as a
user runs it (`rl-harness experiments.mess3_action_symmetry.<leaf>.experiment --smoke`):
Ray, the original's smoke (2 PPO iterations of 2,048 steps), then the analysis of the
step-0, iteration-1 and iteration-2 checkpoints on their own play. Minutes on 2 loaded
cores, so `slow`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rl_harness import read_results
from tests.study.test_belief_geometry_smoke import smoke

STUDY = "experiments.mess3_action_symmetry"
DELAYS = {"variant_2": 1, "variant_2_no_delay": 0}


@pytest.mark.slow
@pytest.mark.parametrize("leaf", sorted(DELAYS))
def test_a_leaf_smoke_writes_probes_and_readouts(tmp_path, leaf):
    run_dir = smoke(f"{STUDY}.{leaf}.experiment", tmp_path, leaf)
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["options"]["smoke"] is True
    assert manifest["budget"]["name"] == "smoke"
    record = json.loads((run_dir / "probe_metrics.json").read_text())
    assert record["leaf"] == leaf and record["observation_delay"] == DELAYS[leaf]
    assert round(record["facts"]["threshold"], 4) == 0.7541
    assert round(record["facts"]["entry_bound"], 4) == 0.3324
    # Step 0 and both iterations, each on its own play, with the original's per-checkpoint
    # figures: MSE, target variance, branch baseline, occupancy, read-outs by hidden state.
    probes = record["probes"]
    # RLlib's counted steps: one batch exactly per iteration (the smoke's 2 copies each
    # sample one whole episode per batch; 16 copies overshot to 4,110: spec.py).
    steps = [p["env_steps"] for p in probes]
    assert steps == [0, 2048, 4096]
    for probe in probes:
        assert probe["mse"] >= 0 and probe["target_variance"] > 0
        assert probe["branch_baseline_mse"] >= 0
        extra = probe["extra"]
        # The reward is leaving state 2: the reward per step is its occupancy.
        assert extra["reward_state_2_fraction"] == probe["reward_per_step"]
        readouts = extra["readouts"]
        assert np.isclose(sum(readouts["fractions"]), 1.0)
        assert set(readouts["by_hidden_state"]) <= {"0", "1", "2"}
        assert 0.0 <= readouts["agreement"] <= 1.0
    final = record["final"]["policy_readouts"]
    assert set(final) == {"n_actions", "greedy", "sampled", "reference_value"}
    for name in ("greedy", "sampled"):
        block = final[name]
        if DELAYS[leaf] == 1:
            # At delay 1 the one-step oracle takes the positive action at every belief the
            # agent can hold, so agreeing with it is taking the positive action.
            assert block["reference_fractions"] == [0.0, 1.0, 0.0]
            assert block["agreement"] == pytest.approx(block["fractions"][1])
    assert 0.0 < final["reference_value"]["value"] < 1.0
    result = read_results(run_dir)
    assert result.value("iterations") == 2 and result.value("checkpoints") == 3
    assert result.value("env_steps") == steps[-1]  # the counted steps (see above)
    assert (
        result.value("reward_state_2_fraction_greedy")
        == record["final"]["reward_state_2_fraction"]["greedy"]
    )
    # Iterations with a finished episode: the one smoke run made (2026-12-07) had one point.
    curve = record["training_curve"]
    assert 1 <= len(curve) <= 2 and curve[-1]["iteration"] == 2

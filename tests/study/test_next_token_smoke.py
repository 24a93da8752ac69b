"""Both MESS3 next-token recipes (mess3_next_token), end to end through the CLI in smoke mode.

Each run starts Ray, trains one tiny PPO iteration and probes the agent: about a minute on
2 idle CPU cores, so these are `slow`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image
import pytest

from tests.study.test_next_token_configs import LEAVES

CLI = Path(sys.executable).with_name("rl-harness")


@pytest.mark.slow
@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_recipe_smoke_run_through_the_cli(leaf, tmp_path):
    started = time.perf_counter()
    completed = subprocess.run(
        [
            str(CLI),
            LEAVES[leaf],
            "--smoke",
            "--run-id",
            "smoke",
            "--results-dir",
            str(tmp_path / "results"),
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
            "--no-upload-artifacts",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - started
    assert completed.returncode == 0, completed.stderr[-4000:]
    run_dir = tmp_path / "results" / "smoke"
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["options"]["smoke"] is True

    metrics = json.loads((run_dir / "probe_metrics.json").read_text())
    assert metrics["recipe"] == leaf
    assert metrics["process"]["x"] == 0.05 and metrics["process"]["alpha"] == 0.85
    assert metrics["aux_weight"] == (1.0 if leaf == "next_token_aux" else 0.0)
    probe = metrics["probe"]
    assert probe["n_test_episodes"] + probe["n_train_episodes"] == metrics["n_episodes"] == 32
    r2 = probe["r2_pooled"]
    assert r2["low"] <= r2["value"] <= r2["high"] <= 1.0
    assert set(probe["r2"]) == {"belief_state_0", "belief_state_1", "belief_state_2"}
    assert probe["mse_pooled"]["value"] < probe["mse_train_mean_pooled"]["value"]
    assert set(metrics["controls"]) == {"observation_probe", "untrained_module_probe"}
    rewards = metrics["reward_per_step"]
    assert 0.66 < rewards["bayes_optimal"] < 0.70
    assert rewards["memoryless_optimal"] < rewards["bayes_optimal"]
    # Greedy rewards are 0/1 hits over n_episodes x episode_length steps: a whole count.
    hits = rewards["agent_greedy"] * metrics["n_episodes"] * metrics["episode_length"]
    assert hits == pytest.approx(round(hits), abs=1e-6)
    # On the same histories no policy's expected reward beats the Bayes-optimal one's.
    assert rewards["agent_greedy_expected"] <= rewards["bayes_optimal_same_episodes"]
    # The training reward is the last recorded episode return per step, exactly.
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last_return = rows[-1]["env_runners/episode_return_mean"]
    assert rewards["agent_training"] == last_return / metrics["episode_length"]
    assert metrics["env_steps"] == 256

    for name in ("belief_simplex.png", "learning_curve.png"):
        assert matplotlib.image.imread(run_dir / name).shape[0] > 100
    checkpoint = Path(metrics["checkpoint"])
    assert checkpoint.is_relative_to(tmp_path / "artifacts" / "smoke")
    print(f"{leaf} smoke: {wall:.1f} s wall")

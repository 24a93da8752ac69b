"""The token-guess study end to end through the real CLI in smoke mode: `ppo`, `supervised`,
then `synthesis` over their runs. Each run starts Ray, trains one small iteration and probes
step 0 and the checkpoint: minutes on 2 cores, so these are `slow`."""

from __future__ import annotations

import json

import matplotlib.image
import pytest

from tests.study.test_belief_geometry_smoke import smoke
from tests.study.test_token_guess_configs import STUDY, TRAINING_LEAVES

DEPTHS = {"embed", "block_1", "block_2", "block_3", "block_4", "final_norm"}


@pytest.fixture(scope="module")
def study_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("token_guess")
    return root, {leaf: smoke(target, root, leaf) for leaf, target in TRAINING_LEAVES.items()}


def _learner_keys(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {key.rsplit("/", 1)[-1] for key in rows[-1] if key.startswith("learners/")}


@pytest.mark.slow
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_training_leaf_smoke_writes_its_records(study_runs, leaf):
    _, runs = study_runs
    run_dir = runs[leaf]
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["options"]["smoke"] is True
    metrics = json.loads((run_dir / "probe_metrics.json").read_text())
    result = json.loads((run_dir / "result.json").read_text())
    assert metrics["recipe"] == leaf and metrics["env_steps"] == 1024
    assert metrics["process"] == {
        "model": "rl_harness.envs.mess3:mess3_model",
        "x": 0.05,
        "alpha": 0.85,
        "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    }
    points = metrics["checkpoints"]
    assert [(p["iteration"], p["env_steps"]) for p in points] == [(0, 0), (1, 1024)]
    assert points[1]["source"].endswith("iter_000001")
    for point in points:
        assert 0.0 <= point["greedy_accuracy"] <= point["bayes_optimal_same_steps"] <= 1.0
        assert point["probe"]["n_train_episodes"] + point["probe"]["n_test_episodes"] == 8
        assert point["probe"]["within_branch"]["k"] == 2
        assert point["r2"] == point["probe"]["r2_pooled"]["value"]
    assert set(metrics["final_by_depth"]) == DEPTHS
    # The summary is the last checkpoint's; the step-0 module is the same for both leaves
    # (same spec, same seed), so their step-0 numbers agree.
    assert result["greedy_accuracy"] == points[-1]["greedy_accuracy"]
    assert result["probe_r2_within_branch"] == points[-1]["r2_within_branch"]
    assert result["bayes_optimal_accuracy"] == pytest.approx(0.689577, abs=1e-6)
    assert [p["env_steps"] for p in result["over_training"]] == [0, 1024]
    other = runs["supervised" if leaf == "ppo" else "ppo"]
    other_metrics = json.loads((other / "probe_metrics.json").read_text())
    assert other_metrics["checkpoints"][0]["probe"] == points[0]["probe"]
    # The supervised learner computes only its cross-entropy: none of PPO's loss terms.
    keys = _learner_keys(run_dir)
    if leaf == "supervised":
        assert {"loss_bits", "accuracy"} <= keys and not keys & {"policy_loss", "vf_loss"}
    else:
        assert {"policy_loss", "vf_loss"} <= keys and "loss_bits" not in keys
    for name in ("fractal.png", "learning_curve.png"):
        assert matplotlib.image.imread(run_dir / name).shape[0] > 100


@pytest.mark.slow
def test_synthesis_smoke_compares_the_leaves(study_runs):
    root, runs = study_runs
    run_dir = smoke(
        f"{STUDY}.synthesis.experiment",
        root,
        "synthesis",
        {"MESS3_TOKEN_GUESS_RUNS": str(root)},
    )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["runs"] == 2
    accuracy = {
        leaf: json.loads((runs[leaf] / "result.json").read_text())["greedy_accuracy"]
        for leaf in TRAINING_LEAVES
    }
    assert {arm.rsplit("/", 1)[-1]: v for arm, v in result["greedy_accuracy"].items()} == (
        pytest.approx(accuracy)
    )
    table = (run_dir / "study_table.md").read_text()
    assert "Bayes-optimal accuracy, 10-token window | 0.6896" in table
    assert "| ppo | 1,024 | 1 |" in table and "| supervised | 0 | 1 |" in table
    for name in ("comparison.png", "over_training.png"):
        assert matplotlib.image.imread(run_dir / name).shape[0] > 100

"""The token-guess study end to end through the real CLI in smoke mode: `ppo`, `supervised`,
then `synthesis` over their runs. Each run starts Ray, trains one small iteration and probes
its step-0 and iteration-1 checkpoints: minutes on 2 cores, so these are `slow`. A leaf's
run starts when a test first needs it, so `-k "writes_its_records and ppo"` runs one."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest
import torch

from rl_harness import read_results
from rl_harness.analysis import load_module
from tests.study.test_belief_geometry_smoke import smoke
from tests.study.test_token_guess_configs import STUDY, TRAINING_LEAVES

DEPTHS = {"embed", "block_1", "block_2", "block_3", "block_4", "final_norm"}


class StudyRuns:
    """The training leaves' smoke runs under one root, each run when first asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._runs: dict[str, Path] = {}

    def __getitem__(self, leaf: str) -> Path:
        if leaf not in self._runs:
            self._runs[leaf] = smoke(TRAINING_LEAVES[leaf], self.root, leaf)
        return self._runs[leaf]


@pytest.fixture(scope="module")
def study_runs(tmp_path_factory):
    return StudyRuns(tmp_path_factory.mktemp("token_guess"))


def _weights(checkpoint: str) -> dict[str, torch.Tensor]:
    return load_module(Path(checkpoint)).state_dict()


def _learner_keys(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {key.rsplit("/", 1)[-1] for key in rows[-1] if key.startswith("learners/")}


@pytest.mark.slow
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_training_leaf_smoke_writes_its_records(study_runs, leaf):
    run_dir = study_runs[leaf]
    manifest = json.loads((run_dir / "run_manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["options"]["smoke"] is True
    metrics = json.loads((run_dir / "probe_metrics.json").read_text())
    result = read_results(run_dir).value
    assert metrics["recipe"] == leaf and metrics["env_steps"] == 1024
    assert metrics["schema_version"] == 2
    assert metrics["process"] == {
        "model": "rl_harness.envs.mess3:mess3_model",
        "x": 0.05,
        "alpha": 0.85,
        "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    }
    points = metrics["checkpoints"]
    assert [(p["iteration"], p["env_steps"]) for p in points] == [(0, 0), (1, 1024)]
    # The memory yardstick (issue 37): yardstick.json, its agent the final probe's.
    yardstick = json.loads((run_dir / "yardstick.json").read_text())
    assert yardstick["agent"]["r2_within_branch"] == pytest.approx(points[-1]["r2_within_branch"])
    assert metrics["yardstick"]["file"] == "yardstick.json"
    assert yardstick["untrained"]["r2_within_branch"]["n"] == 5
    # Step 0 is the run's own step-0 checkpoint, as checkpoints.jsonl records it; training
    # then changed the weights.
    saved = [json.loads(line) for line in (run_dir / "checkpoints.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["env_steps"], r["reasons"]) for r in saved] == [
        (0, 0, ["start"]),
        (1, 1024, ["log"]),
    ]
    assert points[0]["source"].endswith("iter_000000")
    assert points[1]["source"].endswith("iter_000001")
    before, after = _weights(points[0]["source"]), _weights(points[1]["source"])
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    for point in points:
        assert 0.0 <= point["greedy_accuracy"] <= point["bayes_optimal_same_steps"] <= 1.0
        assert point["probe"]["n_train_episodes"] + point["probe"]["n_test_episodes"] == 8
        assert point["probe"]["within_branch"]["k"] == 2
        assert point["r2"] == point["probe"]["r2_pooled"]["value"]
    assert set(metrics["final_by_depth"]) == DEPTHS
    # The summary is the last checkpoint's, its step-0 fields step 0's.
    assert result("greedy_accuracy") == points[-1]["greedy_accuracy"]
    assert result("step0_probe_r2") == points[0]["r2"]
    assert result("probe_r2_within_branch") == points[-1]["r2_within_branch"]
    assert result("bayes_optimal_accuracy") == pytest.approx(0.689577, abs=1e-6)
    # The supervised learner computes only its cross-entropy: none of PPO's loss terms.
    keys = _learner_keys(run_dir)
    if leaf == "supervised":
        assert {"loss_bits", "accuracy"} <= keys and not keys & {"policy_loss", "vf_loss"}
    else:
        assert {"policy_loss", "vf_loss"} <= keys and "loss_bits" not in keys
    for name in ("fractal.png", "learning_curve.png"):
        assert matplotlib.image.imread(run_dir / name).shape[0] > 100


@pytest.mark.slow
def test_both_leaves_start_from_the_same_weights(study_runs):
    # Same spec, same seed: RLlib's Learner seeds torch before it builds its module, so the
    # two leaves' step-0 checkpoints hold the same weights and their step-0 probes agree.
    step_0 = {
        leaf: json.loads((study_runs[leaf] / "probe_metrics.json").read_text())["checkpoints"][0]
        for leaf in TRAINING_LEAVES
    }
    ppo, supervised = _weights(step_0["ppo"]["source"]), _weights(step_0["supervised"]["source"])
    assert ppo.keys() == supervised.keys()
    assert all(torch.equal(ppo[k], supervised[k]) for k in ppo)
    assert step_0["ppo"]["probe"] == step_0["supervised"]["probe"]
    # The init ablation starts elsewhere: PyTorch's default trunk (its input projection has a
    # bias), policy output x 0.01.
    ablation = _weights(step_0["ppo_default_init"]["source"])
    assert set(ablation) - set(ppo) == {"transformer.embed.bias"}
    block = "transformer.blocks.0.mlp.0.weight"
    assert ppo[block].std() == pytest.approx(0.02, abs=0.002)
    assert ablation[block].std() > 0.05  # uniform in +-1/sqrt(64): std 0.072
    assert ablation["pi.net.0.weight"].abs().max() < 0.01 < ppo["pi.net.0.weight"].abs().max()


@pytest.mark.slow
def test_synthesis_smoke_compares_the_leaves(study_runs):
    root = study_runs.root
    runs = {leaf: study_runs[leaf] for leaf in TRAINING_LEAVES}
    run_dir = smoke(
        f"{STUDY}.synthesis.experiment",
        root,
        "synthesis",
        {"MESS3_TOKEN_GUESS_RUNS": str(root)},
    )
    result = read_results(run_dir)
    assert result.value("runs") == 3
    accuracy = {leaf: read_results(runs[leaf]).value("greedy_accuracy") for leaf in TRAINING_LEAVES}
    # Arms are named by leaf and recorded initialisation.
    by_arm = {
        name.removeprefix("greedy_accuracy/").split(" [")[0]: metric.value
        for name, metric in result.items()
        if name.startswith("greedy_accuracy/")
    }
    assert by_arm == pytest.approx(accuracy)
    table = (run_dir / "study_table.md").read_text()
    assert "Bayes-optimal accuracy, 10-token window | 0.6896" in table
    original, default = "[normal 0.02, pi x1, vf x1]", "[torch_default, pi x0.01, vf x1]"
    assert f"| ppo {original} | 1,024 | 1 |" in table
    assert f"| supervised {original} | 0 | 1 |" in table
    assert f"| ppo_default_init {default} | 1,024 | 1 |" in table
    assert f"| ppo {original} end - ppo_default_init {default} end |" in table
    assert "## Memory yardstick" in table and "missing" not in table.split("## Memory")[1]
    for name in ("comparison.png", "over_training.png"):
        assert matplotlib.image.imread(run_dir / name).shape[0] > 100


@pytest.mark.slow
def test_kl_ablation_leaf_smoke_trains_without_the_kl_term(tmp_path):
    """`ppo_no_kl` through the real CLI: its run records `use_kl_loss: false` and its label,
    and its learner adapts no KL coefficient (ppo's logs curr_kl_coeff) and its KL loss is
    RLlib's constant 0 for a disabled term."""
    run_dir = smoke(f"{STUDY}.ppo_no_kl.experiment", tmp_path, "ppo_no_kl")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["use_kl_loss"] is False
    metrics = json.loads((run_dir / "probe_metrics.json").read_text())
    assert metrics["recipe"] == "ppo_no_kl" and metrics["env_steps"] == 1024
    keys = _learner_keys(run_dir)
    assert {"policy_loss", "vf_loss"} <= keys and "curr_kl_coeff" not in keys
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    kl = [value for key, value in rows[-1].items() if key.endswith("/mean_kl_loss")]
    assert kl == [0.0]

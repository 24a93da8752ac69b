"""Notebook use: `rl_harness.train` records a run exactly as the CLI does; no library plot
switches matplotlib's backend; `load_module` keeps RLlib's deprecation lines off the console."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import rl_harness
from rl_harness.cli import main
from tests.harness import recipes
from tests.tools.helpers import manifest, run_dirs, write_leaf


def test_train_writes_the_same_records_as_the_cli(git_repo, capsys):
    repo, _ = git_repo
    leaf = write_leaf(repo, recipes.QUICK)
    trained = rl_harness.train(str(leaf), seed=7, smoke=True, upload_artifacts="never")
    assert trained.status == "completed" and trained.error is None
    assert trained.result == {"seen_status": "running", "seed": 7, "smoke": True}
    assert main([str(leaf), "--seed", "7", "--smoke", "--no-upload-artifacts"]) == 0
    by_train, by_cli = (manifest(p) for p in run_dirs(leaf))
    assert by_train["run_id"] == trained.run_id
    # the same record: every field, the same options, the same files
    assert sorted(by_train) == sorted(by_cli)
    ignored = {"run_id"}
    assert {k: v for k, v in by_train["options"].items() if k not in ignored} == {
        k: v for k, v in by_cli["options"].items() if k not in ignored
    }
    assert by_train["command"]["argv"] == [
        "rl-harness",
        str(leaf),
        "--seed",
        "7",
        "--smoke",
        "--no-upload-artifacts",
    ]
    names = [sorted(p.name for p in d.iterdir()) for d in run_dirs(leaf)]
    assert names[0] == names[1]
    assert (trained.artifacts_dir / "blob.bin").is_file()
    # `runs` lists it like any other
    capsys.readouterr()
    assert main(["runs", str(leaf.parent)]) == 0
    assert trained.run_id in capsys.readouterr().out


def test_train_refuses_bad_input_before_any_folder(git_repo):
    repo, _ = git_repo
    leaf = write_leaf(repo, recipes.QUICK)
    with pytest.raises(ValueError, match="seed must be in"):
        rl_harness.train(str(leaf), seed=-1)
    assert run_dirs(leaf) == []


def test_a_failed_recipe_is_recorded_and_returned(git_repo):
    repo, _ = git_repo
    trained = rl_harness.train(str(write_leaf(repo, recipes.FAILING)), upload_artifacts="never")
    assert trained.status == "failed" and "broke on purpose" in trained.error["message"]
    assert trained.result is None


def test_probe_plot_leaves_the_backend_alone(tmp_path, monkeypatch):
    import matplotlib

    from rl_harness.analysis.checkpoint_probes import CheckpointProbe, plot_probe_over_training
    from rl_harness.analysis.probes.bootstrap import Estimate

    def refuse(*args, **kwargs):
        raise AssertionError("the library switched matplotlib's backend")

    monkeypatch.setattr(matplotlib, "use", refuse)
    before = matplotlib.get_backend()
    probes = [
        CheckpointProbe(steps, f"iter_{steps}", Estimate(0.5, 0.4, 0.6), None)
        for steps in (0, 1000)
    ]
    path = tmp_path / "probe.png"
    series = plot_probe_over_training(path, probes, title="t")
    assert path.stat().st_size > 0 and series["r2_pooled"] == [0.5, 0.5]
    assert matplotlib.get_backend() == before


def _module_checkpoint(root: Path) -> Path:
    """An algorithm-checkpoint layout holding one real PPO RLModule (no Ray needed)."""
    import gymnasium as gym
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import (
        DefaultPPOTorchRLModule,
    )
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl_harness.analysis.checkpoints import MODULE_SUBDIR

    env = gym.make("CartPole-v1")
    module = RLModuleSpec(
        module_class=DefaultPPOTorchRLModule,
        observation_space=env.observation_space,
        action_space=env.action_space,
        model_config={"fcnet_hiddens": [8]},
    ).build()
    checkpoint = root / "iter_000001"
    module.save_to_path(checkpoint / MODULE_SUBDIR / "default_policy")
    (checkpoint / "rllib_checkpoint.json").write_text(json.dumps({"checkpoint_version": "2.1"}))
    return checkpoint


LOAD = """
import logging, sys
from rl_harness.analysis import load_module
logging.getLogger("rl_harness").setLevel(getattr(logging, sys.argv[2]))
module = load_module(sys.argv[1])
print("eval mode" if not module.training else "train mode")
"""


def test_load_module_keeps_rllib_deprecations_off_the_console(tmp_path):
    # RLlib logs each deprecation once per process: each load gets a fresh one. The two
    # levels' processes run side by side (each pays torch's and RLlib's import).
    checkpoint = _module_checkpoint(tmp_path)
    loads = {
        level: subprocess.Popen(
            [sys.executable, "-c", LOAD, str(checkpoint), level],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for level in ("WARNING", "DEBUG")
    }
    for level, process in loads.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-2000:]
        assert out.strip() == "eval mode"
        # at WARNING RLlib's line stays off; with the library's debug lines it shows (the
        # silencing is what hides it)
        assert ("DeprecationWarning" in err) == (level == "DEBUG"), (level, err)

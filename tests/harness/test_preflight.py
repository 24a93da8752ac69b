"""Bad input a run can see in the driver fails before Ray starts, as one line naming the key
or path: through the CLI, on the real MESS3 next-token recipe (its config, one thing broken)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.cli import main
from tests.tools.helpers import error_line, manifest, run_dirs, write_leaf

# The real recipe's config with one edit; stop=1 (a run that got past the checks would train).
BROKEN = """
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from experiments.mess3_next_token.reward_only import experiment as real
from rl_harness import run_algorithm

def run(context):
    config = real.build_config(real.SMOKE)
    spec = real.module_spec()
    {edit}
    run_algorithm(config, context, stop=1)
"""
MODEL_TYPO = BROKEN.replace(
    "{edit}",
    "config.rl_module(rl_module_spec=RLModuleSpec(module_class=spec.module_class, "
    'model_config={**spec.model_config, "hiden_size": 8}))',
)
NEGATIVE_ALPHA = BROKEN.replace(
    "{edit}",
    "config.environment(env_config={**config.env_config, "
    '"model_kwargs": {"x": 0.05, "alpha": -0.5}})',
)
# CartPole with a given hidden size, resumed from --resume-from.
CARTPOLE = """
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import run_algorithm

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(model_config={{"fcnet_hiddens": [{hidden}]}})
    )
    run_algorithm(config, context, stop=1)
"""


@pytest.fixture
def no_ray_start(monkeypatch):
    """Fails the test if the harness starts (or connects to) Ray."""
    import rl_harness.harness.rayinit as rayinit

    def ray_up() -> bool:
        return bool(sys.modules.get("ray")) and sys.modules["ray"].is_initialized()

    # In the whole suite an earlier test's session may already be up: only a new one counts.
    was_up = ray_up()
    calls = []
    monkeypatch.setattr(rayinit, "start_ray", lambda address: calls.append(address))
    yield calls
    assert calls == [], "Ray was started"
    assert was_up or not ray_up()


def _rejected(leaf: Path, capsys, *options: str) -> str:
    """A run refused before Ray leaves no run folder (results or artifacts), as one refused
    before its context is made: nothing happened that a record could tell."""
    before = set(run_dirs(leaf))
    assert main([str(leaf), "--no-upload-artifacts", *options]) == 2
    line = error_line(capsys)
    assert set(run_dirs(leaf)) == before
    artifacts = leaf.parent / "artifacts"
    assert not artifacts.exists() or list(artifacts.iterdir()) == []
    return line


def test_a_model_config_typo_is_one_line_before_ray(git_repo, capsys, no_ray_start):
    repo, _ = git_repo
    line = _rejected(write_leaf(repo, MODEL_TYPO), capsys)
    assert "unknown model_config key 'hiden_size'" in line
    assert "GRUActorCritic" in line and "hidden_size" in line  # the accepted keys


def test_a_negative_mess3_alpha_is_one_line_before_ray(git_repo, capsys, no_ray_start):
    repo, _ = git_repo
    line = _rejected(write_leaf(repo, NEGATIVE_ALPHA), capsys)
    assert "alpha" in line and "-0.5" in line


def _unwritable_dir(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes through permission bits; sysfs refuses even root
        return Path("/sys/rl-harness-test-read-only")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "runs"


@pytest.mark.parametrize("flag", ["--results-dir", "--artifacts-dir"])
def test_a_read_only_folder_is_one_line(git_repo, tmp_path, capsys, flag):
    repo, _ = git_repo
    leaf = write_leaf(repo, "def run(context):\n    return {}\n")
    target = _unwritable_dir(tmp_path)
    assert main([str(leaf), flag, str(target), "--no-upload-artifacts"]) == 2
    line = error_line(capsys)
    assert "is not writable" in line and str(target) in line
    assert run_dirs(leaf) == []  # the claimed run id was given back


UNWRITABLE_VALUE = """
def run(context):
    return {"score": 1.5, "nested": {"values": [1, {2, 3}], "ok": 2}, "blob": object()}
"""


def test_a_result_value_without_json_form_keeps_the_other_keys(git_repo, capsys):
    repo, _ = git_repo
    leaf = write_leaf(repo, UNWRITABLE_VALUE)
    assert main([str(leaf), "--no-upload-artifacts"]) == 0
    (run,) = run_dirs(leaf)
    assert json.loads((run / "result.json").read_text()) == {"score": 1.5, "nested": {"ok": 2}}
    record = manifest(run)
    assert record["status"] == "completed"
    # a bad list element leaves out the list's key; the reason names the element
    left_out = record["result_keys_left_out"]
    assert sorted(left_out) == ["blob", "nested/values"]
    assert "builtins.set at key 'nested/values/1'" in left_out["nested/values"]
    err = capsys.readouterr().err
    assert "left out key 'nested/values'" in err and "left out key 'blob'" in err


# --- --resume-from: a real checkpoint, made once in a separate process --------------------

MAKE_CHECKPOINT = """
import sys
from ray.rllib.algorithms.ppo import PPOConfig
config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0)
    .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
    .rl_module(model_config={"fcnet_hiddens": [16]})
)
algo = config.build_algo()
algo.save_to_path(sys.argv[1])
algo.stop()
"""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ckpt") / "iter_000001"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    subprocess.run(
        [sys.executable, "-c", MAKE_CHECKPOINT, str(path)], check=True, env=env, timeout=600
    )
    return path


@pytest.mark.slow
def test_a_corrupt_checkpoint_says_corrupt_and_names_the_path(
    git_repo, tmp_path, capsys, checkpoint, no_ray_start
):
    repo, _ = git_repo
    broken = tmp_path / "broken" / "iter_000001"
    shutil.copytree(checkpoint, broken)
    pickled = broken / "learner_group/learner/rl_module/default_policy/class_and_ctor_args.pkl"
    pickled.write_bytes(pickled.read_bytes()[:40])  # truncated, as an interrupted copy leaves it
    leaf = write_leaf(repo, CARTPOLE.format(hidden=16))
    line = _rejected(leaf, capsys, "--resume-from", str(broken))
    assert f"checkpoint {broken} is corrupt" in line
    assert "default_policy/class_and_ctor_args.pkl" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("state_file", "damage"),
    [
        ("learner_group/learner/rl_module/default_policy/module_state.pkl", "truncate"),
        ("algorithm_state.pkl", "garbage"),
    ],
)
def test_damaged_weights_are_refused_before_ray(
    git_repo, tmp_path, capsys, checkpoint, no_ray_start, state_file, damage
):
    # The weight files themselves are loaded in preflight, not ~40 s later in Ray's restore.
    repo, _ = git_repo
    broken = tmp_path / "broken" / "iter_000001"
    shutil.copytree(checkpoint, broken)
    state = broken / state_file
    assert state.is_file()
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"not a pickle\n" * 9)
    leaf = write_leaf(repo, CARTPOLE.format(hidden=16))
    line = _rejected(leaf, capsys, "--resume-from", str(broken))
    assert f"checkpoint {broken} is corrupt: {state_file} cannot be read" in line


@pytest.mark.slow
def test_a_checkpoint_of_another_setup_names_the_mismatch(
    git_repo, capsys, checkpoint, no_ray_start
):
    repo, _ = git_repo
    leaf = write_leaf(repo, CARTPOLE.format(hidden=32))
    line = _rejected(leaf, capsys, "--resume-from", str(checkpoint))
    assert f"checkpoint {checkpoint} does not fit this config" in line
    assert "model_config['fcnet_hiddens'] is [16] there, [32] here" in line

"""RunContext, run ids, hardware profiles and seed streams."""

from __future__ import annotations

import dataclasses
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rl_harness.harness.context import make_context, new_run_id
from rl_harness.harness.hardware import apply_hardware, resolve_profile
from rl_harness.seeding import stream_rng, stream_seed, stream_sequence


def _claim(base: str) -> str:
    return make_context(Path(base)).run_id


def test_context_is_frozen(tmp_path: Path):
    context = make_context(tmp_path, seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.seed = 4
    assert context.results_dir == tmp_path.resolve() / "results" / context.run_id
    assert context.artifacts_dir.is_dir() and context.results_dir.is_dir()


def test_run_id_format():
    run_id = new_run_id()
    stamp, suffix = run_id.split("-")
    assert re.fullmatch(r"\d{8}T\d{6}Z", stamp), stamp
    assert re.fullmatch(r"[0-9a-f]{8}", suffix), suffix


def test_run_ids_unique_under_concurrent_starts(tmp_path: Path):
    with ProcessPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(_claim, [str(tmp_path)] * 64))
    assert len(set(ids)) == 64
    assert len(list((tmp_path / "results").iterdir())) == 64


@pytest.mark.parametrize(
    ("seed", "match"),
    [
        (-1, r"seed must be in \[0, 4294967295\], got -1$"),
        (2**32, r"seed must be in \[0, 4294967295\], got 4294967296$"),
        (True, r"seed must be an integer, got True$"),
        (1.5, r"seed must be an integer, got 1\.5$"),
    ],
)
def test_bad_seed_rejected(tmp_path: Path, seed, match):
    with pytest.raises(ValueError, match=match):
        make_context(tmp_path, seed=seed)


def test_profiles_map_to_resources():
    cpu = resolve_profile("cpu-local")
    assert (cpu.num_env_runners, cpu.num_learners, cpu.num_gpus_per_learner) == (0, 0, 0)
    single = resolve_profile("single-gpu", cpus=16)
    assert single.num_gpus_per_learner == 1 and single.num_learners == 0
    assert single.num_env_runners == 14
    multi = resolve_profile("multi-gpu", gpus=4, cpus=32)
    assert multi.num_learners == 4 and multi.num_gpus_per_learner == 1
    assert resolve_profile("auto", gpus=0).profile == "cpu-local"
    auto = resolve_profile("auto", gpus=1, cpus=8)
    assert auto.profile == "single-gpu" and auto.requested == "auto"
    assert resolve_profile("auto", gpus=8, cpus=64).num_learners == 8
    with pytest.raises(ValueError, match="unknown hardware profile"):
        resolve_profile("tpu-pod")


def test_apply_hardware_leaves_science_alone():
    from ray.rllib.algorithms.ppo import PPOConfig

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(lr=1e-3, gamma=0.9, train_batch_size_per_learner=512)
        .env_runners(num_envs_per_env_runner=4)
    )
    plan = resolve_profile("single-gpu", cpus=6)
    applied = apply_hardware(config, plan)
    assert applied is not config and config.num_env_runners != 4
    assert applied.num_env_runners == 4 and applied.num_gpus_per_learner == 1
    assert applied.num_envs_per_env_runner == 4  # the recipe's choice, not the plan's
    for key in ("lr", "gamma", "train_batch_size_per_learner", "env"):
        assert getattr(applied, key) == getattr(config, key)


def test_named_streams_are_stable_and_independent():
    a = stream_rng(42, "env", "state").integers(0, 2**31, 5)
    b = stream_rng(42, "env", "state").integers(0, 2**31, 5)
    np.testing.assert_array_equal(a, b)
    # A new stream does not move an existing one, and names matter, not order of creation.
    stream_rng(42, "env", "extra")
    np.testing.assert_array_equal(stream_rng(42, "env", "state").integers(0, 2**31, 5), a)
    assert not np.array_equal(stream_rng(42, "env", "emission").integers(0, 2**31, 5), a)
    assert not np.array_equal(stream_rng(43, "env", "state").integers(0, 2**31, 5), a)
    assert stream_sequence(42, "x").spawn_key != stream_sequence(42, "y").spawn_key
    assert 0 <= stream_seed(42, "rllib") < 2**31
    with pytest.raises(ValueError, match="stream names must be non-empty strings"):
        stream_sequence(42)


def test_one_options_record_checked_once_by_make_context(tmp_path: Path):
    from rl_harness.harness.context import RunOptions

    # The record's defaults are the CLI's; keywords replace its fields.
    context = make_context(tmp_path, RunOptions(seed=7, log_to=("mlflow", "mlflow")), smoke=True)
    assert (context.seed, context.smoke, context.hardware.profile) == (7, True, "cpu-local")
    assert context.log_to == ("mlflow",)  # checked and normalized once, here
    assert context.options.seed == 7 and context.options.to_dict()["log_to"] == ["mlflow"]
    assert make_context(tmp_path / "b").seed == RunOptions().seed == 42
    with pytest.raises(TypeError):
        make_context(tmp_path, sede=3)  # a misspelled option is no silent default
    assert context.paths.summary == context.results_dir / "summary.json"

"""The hardware plan chooses torch's intra-op threads in the driver (one per core it gives
the run; a sweep divides the cores among its concurrent runs), overridable by
--torch-threads or $RL_HARNESS_TORCH_THREADS, and the manifest records the choice and what
torch ran with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rl_harness import HardwarePlan
from rl_harness.cli import main
from rl_harness.harness.hardware import TORCH_THREADS_ENV, resolve_profile
from tests.harness import recipes
from tests.tools.helpers import manifest, run_dirs, write_leaf

# What the runners do before Ray starts (prepare_config -> apply_hardware), without Ray.
APPLIES_THE_PLAN = """
import os
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import apply_hardware

def run(context):
    apply_hardware(PPOConfig().environment("CartPole-v1"), context.hardware)
    return {"threads": torch.get_num_threads(), "env": os.environ.get("RL_HARNESS_TORCH_THREADS")}
"""


@pytest.fixture
def torch_threads_restored():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_thread_variables(monkeypatch):
    # The suite runs with OMP_NUM_THREADS=1 (AGENTS.md); these tests set what they need.
    monkeypatch.delenv(TORCH_THREADS_ENV, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def test_the_plan_gives_one_thread_per_core_it_leaves_the_driver(monkeypatch):
    assert resolve_profile("cpu-local", cpus=6).torch_threads == 6  # all in the driver
    # Remote env runners (and learners) hold their own cores; the driver keeps the rest.
    assert resolve_profile("single-gpu", cpus=6, gpus=1).torch_threads == 2
    assert resolve_profile("multi-gpu", cpus=8, gpus=2).torch_threads == 1
    assert resolve_profile("cpu-local", cpus=6, torch_threads=3).torch_threads == 3
    monkeypatch.setenv(TORCH_THREADS_ENV, "2")
    plan = resolve_profile("cpu-local", cpus=6)
    assert (plan.torch_threads, plan.torch_threads_from) == (2, TORCH_THREADS_ENV)
    monkeypatch.setenv(TORCH_THREADS_ENV, "two")
    with pytest.raises(ValueError, match="RL_HARNESS_TORCH_THREADS must be a positive integer"):
        resolve_profile("cpu-local")
    # Without ours, the user's OMP_NUM_THREADS is the choice, as torch itself reads it.
    monkeypatch.delenv(TORCH_THREADS_ENV)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    plan = resolve_profile("cpu-local", cpus=6)
    assert (plan.torch_threads, plan.torch_threads_from) == (1, "OMP_NUM_THREADS")
    assert resolve_profile("cpu-local", cpus=6, torch_threads=4).torch_threads == 4


def test_a_run_sets_and_records_the_option(tmp_path: Path, monkeypatch, torch_threads_restored):
    torch.set_num_threads(3)  # as torch's default would be on a bigger machine
    leaf = write_leaf(tmp_path, APPLIES_THE_PLAN)
    assert main([str(leaf), "--torch-threads", "1"]) == 0
    assert torch.get_num_threads() == 3  # an in-process run gives the caller's back
    record = manifest(run_dirs(leaf)[0])
    assert record["hardware"]["plan"]["torch_threads"] == 1
    assert record["hardware"]["plan"]["torch_threads_from"] == "option"
    assert record["options"]["torch_threads"] == 1
    assert record["hardware"]["threads"]["torch_intra_op_threads"] == 1
    assert "--torch-threads" in record["command"]["argv"]
    result = json.loads((run_dirs(leaf)[0] / "result.json").read_text())
    assert result["threads"] == 1


def test_the_default_is_the_plans_and_the_environment_overrides_it(
    tmp_path: Path, monkeypatch, torch_threads_restored
):
    monkeypatch.delenv(TORCH_THREADS_ENV, raising=False)
    torch.set_num_threads(5)
    leaf = write_leaf(tmp_path, APPLIES_THE_PLAN)
    assert main([str(leaf)]) == 0
    record = manifest(run_dirs(leaf)[0])
    cores = resolve_profile("cpu-local").torch_threads
    assert record["hardware"]["plan"]["torch_threads"] == cores
    assert record["hardware"]["plan"]["torch_threads_from"] == "plan"
    assert record["hardware"]["threads"]["torch_intra_op_threads"] == cores
    monkeypatch.setenv(TORCH_THREADS_ENV, "1")
    torch.set_num_threads(5)
    assert main([str(leaf)]) == 0
    second = run_dirs(leaf)[-1]
    assert manifest(second)["hardware"]["plan"]["torch_threads_from"] == TORCH_THREADS_ENV
    assert manifest(second)["hardware"]["threads"]["torch_intra_op_threads"] == 1


def test_bad_torch_threads_is_one_line(tmp_path: Path, capsys):
    leaf = write_leaf(tmp_path, recipes.QUICK)
    assert main([str(leaf), "--torch-threads", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rl-harness: error: --torch-threads must be a positive integer, got 0"]
    assert not (leaf.parent / "results").exists()


def test_a_sweep_gives_each_run_the_cores_it_holds(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.delenv(TORCH_THREADS_ENV, raising=False)
    leaf = write_leaf(tmp_path, APPLIES_THE_PLAN)
    assert main(["sweep", str(leaf), "--seeds", "0", "1", "--cpus-per-run", "1"]) == 0
    for run in run_dirs(leaf):
        record = manifest(run)
        assert record["hardware"]["plan"]["torch_threads"] == 1
        assert record["hardware"]["plan"]["torch_threads_from"] == TORCH_THREADS_ENV
        assert json.loads((run / "result.json").read_text())["threads"] == 1


def test_the_plan_is_a_record():
    plan = HardwarePlan("cpu-local", "cpu-local", 0, 0, 0, torch_threads=2)
    assert plan.to_dict()["torch_threads"] == 2


def test_a_bad_environment_value_is_one_line_before_any_folder(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv(TORCH_THREADS_ENV, "-1")
    leaf = write_leaf(tmp_path, recipes.QUICK)
    assert main([str(leaf)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rl-harness: error: {TORCH_THREADS_ENV} must be a positive integer, got '-1'"]
    assert not (leaf.parent / "results").exists()

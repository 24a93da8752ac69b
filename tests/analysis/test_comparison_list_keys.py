"""`compare` reads metrics inside JSON lists: "probes[-1]/r2_pooled" (real runs via the CLI)."""

from __future__ import annotations

import json
import subprocess

import pytest

from rl_harness.analysis.comparison import ComparisonError, compare_runs
from tests.tools.helpers import run_leaf, write_leaf

# Probes over training: a list of checkpoints, the last one scoring 0.5 + seed / 100.
ARM = """
from rl_harness.harness.atomic import write_json_atomic


def run(context):
    probes = [
        {"env_steps": 0, "r2_pooled": {"value": 0.0, "low": -0.1, "high": 0.1}},
        {"env_steps": 100, "r2_pooled": {"value": 0.5 + context.seed / 100}},
    ]
    write_json_atomic(context.results_dir / "closed_loop_probes.json", {"probes": probes})
    return {"grid": [[1.0, 2.0], [3.0, 4.0 + context.seed]]}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lists") / "exp-repo"
    root.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "test@example.com"],
        ["config", "user.name", "Test"],
    ):
        subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True)
    leaf = write_leaf(root, ARM, "a")
    subprocess.run(["git", "-C", str(root), "add", "-A"], capture_output=True, check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "a"], capture_output=True, check=True)
    return [run_leaf(leaf, "--seed", str(seed), "--no-upload-artifacts") for seed in (1, 2)]


def test_list_indices_reach_the_last_checkpoint(runs):
    keys = [
        "closed_loop_probes.json:probes[-1]/r2_pooled",
        "closed_loop_probes.json:probes[0]/r2_pooled",
        "grid[1][-1]",
    ]
    arm = compare_runs(runs, keys).arms[0].metrics
    assert sorted(arm[keys[0]].values) == pytest.approx([0.51, 0.52])
    assert arm[keys[1]].values == [0.0, 0.0]
    assert sorted(arm[keys[2]].values) == [5.0, 6.0]
    with pytest.raises(ComparisonError, match=r"probes\[5\]"):  # out of range: not found
        compare_runs(runs, ["closed_loop_probes.json:probes[5]/r2_pooled"])
    saved = json.loads((runs[0] / "closed_loop_probes.json").read_text())
    assert saved["probes"][-1]["env_steps"] == 100

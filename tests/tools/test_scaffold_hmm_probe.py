"""`rl-harness new --template hmm-probe`: a leaf that trains on a named HMM process and probes
the belief; the closing line led by a recipe's declared HEADLINE."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness import apply_hardware
from rl_harness.cli import main
from rl_harness.harness.console import result_summary
from rl_harness.harness.hardware import resolve_profile
from rl_harness.harness.preflight import check_buildable
from tests.tools.helpers import run_leaf, write_leaf

LEAF = "experiments/hmm_probe/belief/experiment.py"


def _scaffold(tmp_path: Path, capsys) -> Path:
    repo = tmp_path / "exp"
    assert main(["new", str(repo), "--template", "hmm-probe"]) == 0
    out = capsys.readouterr().out
    assert "uv run rl-harness experiments.hmm_probe.belief.experiment --smoke" in out
    return repo


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("scaffolded_hmm_probe", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def test_the_template_leaf_is_committed_and_builds_for_each_process(tmp_path, capsys):
    repo = _scaffold(tmp_path, capsys)
    assert (repo / LEAF).is_file() and (repo / "experiments/hmm_probe/__init__.py").is_file()
    tracked = subprocess.run(
        ["git", "-C", str(repo), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert LEAF in tracked and "experiments/example_study/smoke/experiment.py" in tracked
    leaf = _load(repo / LEAF)
    assert leaf.RECIPE.headline[0] == "return_per_step"
    assert leaf.RECIPE.budgets["smoke"] is leaf.SMOKE and leaf.RECIPE.default == "cpu"
    for process in ("mess3", "z1r", "rrxor"):
        leaf.PROCESS = process
        # the config as a CLI run trains it (the default hardware plan applied), its env
        # and GRU built here without Ray
        config = apply_hardware(leaf.build_config(leaf.SMOKE), resolve_profile("cpu-local"))
        built = check_buildable(config)
        (module,) = built.values()
        assert module["class"].__name__ == "GRUActorCritic"
        n_tokens = leaf.FACTORIES[process](**leaf.PROCESSES[process][1]).n_tokens
        assert module["action_space"].n == n_tokens


def test_an_unknown_template_is_one_line(tmp_path, capsys):
    assert main(["new", str(tmp_path / "exp"), "--template", "atari"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown template 'atari'" in err[0]
    assert not (tmp_path / "exp").exists()


@pytest.mark.slow
def test_the_template_leaf_runs_in_smoke_mode(tmp_path, capsys):
    repo = _scaffold(tmp_path, capsys)
    out = subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", LEAF, "--smoke", "--no-upload-artifacts"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run,) = (repo / LEAF).parent.joinpath("results").iterdir()
    result = json.loads((run / "result.json").read_text())
    assert result["process"] == "mess3" and result["iterations"] == 1
    assert 0 <= result["return_per_step"] <= 1 and result["bayes_optimal_per_step"] > 1 / 3
    probe = json.loads((run / "probe_metrics.json").read_text())
    assert probe["probe"]["r2_pooled"]["value"] == result["probe_r2"]
    # the closing line: the declared headline, four numbers
    last = out.stdout.strip().splitlines()[-1]
    assert "result: return_per_step " in last
    assert last.split("result: ")[1].count("|") == 3


HEADLINED = """
from rl_harness import Recipe

def run(context):
    return {"a": 1, "b": 2.5, "nested": {"x": 3, "y": 4}, "c": 5}

RECIPE = Recipe(run=run, headline=("b", "nested/x", "missing"))
"""
MANY = """
def run(context):
    return {f"n{i}": i for i in range(12)}
"""


def test_the_closing_line_is_led_by_the_declared_headline(git_repo, capsys):
    repo, _ = git_repo
    run_leaf(write_leaf(repo, HEADLINED, "headlined"), "--no-upload-artifacts")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("result: b 2.5 | nested/x 3 | missing -")
    run_leaf(write_leaf(repo, MANY, "many"), "--no-upload-artifacts")
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("result: n0 0 | n1 1 | n2 2 | n3 3 | (+8 more in result.json)")


def test_a_mapping_in_the_headline_shows_its_numbers():
    result = {"return_per_step": {"greedy": 0.33582, "sampled": 0.3291}, "probe_r2": 0.9}
    assert result_summary(result, headline=("return_per_step", "probe_r2")) == (
        "return_per_step/greedy 0.3358 | return_per_step/sampled 0.3291 | probe_r2 0.9"
    )

"""`rl-harness sweep --set KEY=A,B`: arms over values as well as seeds (as Hydra's multirun).

Each arm x seed is a full child run of its own (its folder, its manifest with its `--set`
values, what it trained equal to what it recorded); a rerun does only what is missing; the
report is per arm; tuples are swept in brackets; a bad value is one line before any run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rl_harness import read_results
from rl_harness.cli import main
from rl_harness.harness.sweep import SweepError, plan_arms, split_top_level
from tests.tools.helpers import manifest, run_dirs, write_leaf

RECIPE = """
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    steps: int
    lr: float = 0.001
    hidden: tuple[int, ...] = (8,)


BUDGETS = {"smoke": Budget(1), "cpu": Budget(10)}
DEFAULT_BUDGET = "cpu"


def run(context):
    plan = context.settings
    return {"lr": plan.lr, "hidden": list(plan.hidden), "steps": plan.steps}
from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""


@dataclass(frozen=True)
class Budget:  # the recipe's budget type, for the arm planner's field types
    steps: int
    lr: float = 0.001
    hidden: tuple[int, ...] | None = (8,)
    name: str = "a"


def _sweep(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """`rl-harness sweep ...` as a user runs it: its own process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", "sweep", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _records(leaf: Path) -> list[dict]:
    return [manifest(run) for run in run_dirs(leaf)]


def test_values_give_arms_each_a_full_run_and_a_rerun_does_only_what_is_missing(git_repo):
    repo, _ = git_repo
    leaf = write_leaf(repo, RECIPE, "arm")
    # lr swept over two values; hidden=4,4 is one tuple (its commas are the tuple's), as in
    # a run; --budget smoke for every run.
    argv = [str(leaf), "--seeds", "0", "--set", "lr=0.1,0.2", "--set", "hidden=4,4"]
    argv += ["--budget", "smoke", "--no-upload-artifacts"]
    done = _sweep(*argv, cwd=repo)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 runs (1 x 2 arms x 1 seeds) on local processes" in done.stdout
    records = _records(leaf)
    assert sorted(r["options"]["set"] for r in records) == [
        ["lr=0.1", "hidden=4,4"],
        ["lr=0.2", "hidden=4,4"],
    ]
    for record in records:
        # Its own run: completed, its --set in its command and manifest, and what it trained
        # (result.json, from context.settings) is what the manifest records.
        assert record["status"] == "completed" and record["options"]["budget"] == "smoke"
        assert record["command"]["argv"].count("--set") == 2
        settings = record["budget"]["settings"]
        folder = leaf.parent / "results" / record["run_id"]
        result = json.loads((folder / "result.json").read_text())
        assert result == {"lr": settings["lr"], "hidden": [4, 4], "steps": 1}
        assert record["budget"]["overrides"] == {"lr": settings["lr"], "hidden": [4, 4]}
    # Reported per arm, with how to compare the arms.
    assert f"  {leaf} lr=0.1: 1/1 completed" in done.stdout
    assert f"  {leaf} lr=0.2: 1/1 completed" in done.stdout
    assert "--group-by budget.settings.lr" in done.stdout

    # A second seed: the two runs made are found by their manifests; only seed 1 of each arm
    # runs.
    again = _sweep(*[*argv[:2], "0", "1", *argv[3:]], cwd=repo)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count("done before") >= 2
    records = _records(leaf)
    assert len(records) == 4
    by_arm: dict[str, list[int]] = {}
    for record in records:
        by_arm.setdefault(record["options"]["set"][0], []).append(record["seed"])
    assert {arm: sorted(seeds) for arm, seeds in by_arm.items()} == {
        "lr=0.1": [0, 1],
        "lr=0.2": [0, 1],
    }
    assert f"  {leaf} lr=0.2: 2/2 completed" in again.stdout


def test_a_run_of_the_default_budget_is_found_again(git_repo, capsys):
    """No --budget: the run records the budget it resolved ("cpu"), and the rerun still
    finds it (before, every rerun of a recipe with BUDGETS ran everything again)."""
    repo, _ = git_repo
    leaf = write_leaf(repo, RECIPE, "arm")
    argv = ["sweep", str(leaf), "--seeds", "3", "--no-upload-artifacts"]
    assert main(argv) == 0
    (record,) = _records(leaf)
    assert record["options"]["budget"] == "cpu"
    capsys.readouterr()
    assert main(argv) == 0
    assert "done before" in capsys.readouterr().out
    assert len(_records(leaf)) == 1


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness sweep: error: "), err
    return err[0]


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (["lr=0.1,abc"], "--set lr=abc: expected a number (lr is float)"),
        (["hidden=(4,4),8"], "write each tuple value of hidden in ( ), e.g."),
        (["lr=0.1,0.1"], "the value '0.1' is given twice"),
        (["lr=0.1,,0.2"], "an empty value between commas"),
        (["nope=1,2"], "unknown setting 'nope'"),
        (["lr=0.1", "lr=0.2"], "--set lr is given twice"),
    ],
)
def test_a_bad_value_is_one_line_before_any_run(git_repo, capsys, sets, expected):
    repo, _ = git_repo
    leaf = write_leaf(repo, RECIPE, "arm")
    argv = ["sweep", str(leaf), "--seeds", "0", *(w for text in sets for w in ("--set", text))]
    assert main(argv) == 2
    assert expected in _error_line(capsys)
    assert run_dirs(leaf) == []


def test_arm_planner_keeps_tuple_commas_and_takes_the_product():
    budget = Budget(1)
    arms = plan_arms(["hidden=(64,64),(128,),none", "lr=1e-4,3e-4", "steps=5"], budget)
    assert [arm.overrides for arm in arms] == [
        (f"hidden={h}", f"lr={lr}", "steps=5")
        for h in ("64,64", "128", "none")
        for lr in ("1e-4", "3e-4")
    ]
    assert arms[0].swept == ("hidden", "lr") and arms[0].label == "hidden=64,64 lr=1e-4"
    assert arms[0].shared == ("steps=5",)  # what a --then synthesis gets
    # A tuple without brackets is one value, as a run reads it; nothing swept.
    (one,) = plan_arms(["hidden=64,64", "name=x"], budget)
    assert one.overrides == ("hidden=64,64", "name=x") and one.label == "-"
    # A str setting splits at commas outside brackets.
    assert [a.overrides for a in plan_arms(["name=a,f(b,c)"], budget)] == [
        ("name=a",),
        ("name=f(b,c)",),
    ]
    assert split_top_level("(1,2),[3,(4,5)],6") == ["(1,2)", "[3,(4,5)]", "6"]
    with pytest.raises(SweepError, match="write each tuple value"):
        plan_arms(["hidden=(1,2),3"], budget)


# --- real RLlib: the CartPole smoke recipe over two values of a setting -------------------

SMOKE = "experiments.example_study.smoke.experiment"


@pytest.mark.slow
def test_a_value_sweep_of_the_cartpole_smoke_recipe_trains_what_it_records(tmp_path, capsys):
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    # One run at a time on 2 cores (each starts its own Ray).
    argv = ["sweep", SMOKE, "--seeds", "0", "--smoke", "--set", "iterations=1,2"]
    argv += ["--cpus-per-run", "2", "--results-dir", str(results)]
    argv += ["--artifacts-dir", str(artifacts), "--no-upload-artifacts"]
    assert main(argv) == 0, capsys.readouterr().out[-3000:]
    records = {manifest(p)["budget"]["settings"]["iterations"]: p for p in results.iterdir()}
    assert sorted(records) == [1, 2]
    for iterations, folder in records.items():
        record = manifest(folder)
        assert record["status"] == "completed" and record["options"]["set"] == [
            f"iterations={iterations}"
        ]
        rows = (folder / "metrics.jsonl").read_text().splitlines()
        assert len(rows) == iterations  # trained what the record says
        assert read_results(folder).value("iterations") == iterations  # named metrics
    capsys.readouterr()
    # The arms side by side, as the sweep's last line says.
    group = ["--group-by", "budget.settings.iterations"]
    assert main(["compare", str(results), *group, "--metric", "training_iteration"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:4]]
    assert [row[-1] for row in rows] == ["1", "2"]

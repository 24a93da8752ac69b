"""Readers are loud: `runs`, `show`, `compare` and `RunArtifacts` name every run folder they
cannot read and why; `compare` never pools budgets (or smoke with non-smoke) unless told and
names the runs that differ; a `--group-by`/`--where` key no run has is an error; output to a
closed pipe ends quietly. Through the CLI, on records made by real (Ray-free) recipe runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.analysis import RunArtifacts
from rl_harness.cli import main
from rl_harness.harness.runtools.records import RunToolError

RECIPE = """
from dataclasses import dataclass

from rl_harness import write_json


@dataclass(frozen=True)
class Budget:
    steps: int


BUDGETS = {"smoke": Budget(1), "cpu": Budget(10)}
DEFAULT_BUDGET = "cpu"


def run(context):
    # A config.json as the runners write it (a key to group by, and the budget).
    write_json(context.paths.config, {"lr": 0.001, "budget": context.budget_record})
    return {"value": float(context.seed) + context.settings.steps}
from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """study/ of one leaf: two cpu runs (seeds 0, 1) and one smoke run, made by the CLI once
    for the module (each run costs seconds: git, provenance, records)."""
    root = tmp_path_factory.mktemp("loud") / "study"
    leaf = root / "arm" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(RECIPE)
    for argv in (
        ["--seed", "0", "--run-id", "cpu0"],
        ["--seed", "1", "--run-id", "cpu1"],
        ["--seed", "2", "--smoke", "--run-id", "smoke"],
    ):
        assert main([str(leaf), *argv]) == 0
    return root


@pytest.fixture
def study(made: Path, tmp_path: Path) -> dict:
    """A copy of the made study for one test to read or break: its root, results/ and runs."""
    root = tmp_path / "study"
    shutil.copytree(made, root)
    results = root / "arm" / "results"
    return {"root": root, "results": results, **{n: results / n for n in ("cpu0", "cpu1", "smoke")}}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_compare_refuses_smoke_with_cpu_and_names_the_runs(study, capsys):
    capsys.readouterr()
    for extra in ([], ["--allow-mixed"]):  # --allow-mixed is about library commits only
        assert main(["compare", str(study["root"]), "--metric", "value", *extra]) == 2
        (line,) = _lines(capsys.readouterr().err)
        assert line.startswith("rl-harness: error: runs of 2 budgets would be pooled")
        assert "cpu: cpu0, cpu1" in line and "smoke: smoke" in line
        assert "--allow-mixed-budgets" in line
    # One budget compares; the table says which.
    assert main(["compare", str(study["cpu0"]), str(study["cpu1"]), "--metric", "value"]) == 0
    out = capsys.readouterr().out
    assert "budget: cpu" in out and "10.5 [" in out  # mean of 10 and 11, with an interval
    # Told to, it pools and says so.
    argv = ["compare", str(study["root"]), "--metric", "value", "--allow-mixed-budgets"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "mixed budgets pooled: cpu: cpu0, cpu1; smoke: smoke" in out
    # Or pick one budget by the budget config.json records.
    argv = ["compare", str(study["root"]), "--metric", "value", "--where", "budget.name=cpu"]
    assert main(argv) == 0
    assert "budget: cpu\n" in capsys.readouterr().out
    # Or split them by it: one budget per row, nothing pooled.
    argv = ["compare", str(study["root"]), "--metric", "value", "--group-by", "budget.name"]
    assert main(argv) == 0
    rows = {line.split("  ")[0]: line.split()[-1] for line in _lines(capsys.readouterr().out)}
    assert rows["arm [budget.name=cpu]"] == "10.5 [4.147, 16.85]".split()[-1]
    assert rows["arm [budget.name=smoke]"] == "3"


def test_group_by_or_where_on_a_key_no_run_has_is_an_error(study, capsys):
    capsys.readouterr()
    base = ["compare", str(study["cpu0"]), str(study["cpu1"]), "--metric", "value"]
    assert main([*base, "--group-by", "lr"]) == 0
    assert "arm [lr=0.001]" in capsys.readouterr().out
    assert main([*base, "--group-by", "lrr"]) == 2
    (line,) = _lines(capsys.readouterr().err)
    assert line == (
        "rl-harness: error: --group-by lrr: no run's config.json has this key; did you mean lr?"
    )
    assert main([*base, "--where", "lrr=0.001"]) == 2
    assert "--where lrr: no run's config.json has this key" in capsys.readouterr().err
    assert main([*base, "--where", "lr=0.5"]) == 2  # a known key, no run with that value
    assert "no completed run has the config lr=0.5" in capsys.readouterr().err


def test_unreadable_run_folders_are_named(study, capsys):
    (study["cpu1"] / "run_manifest.json").write_text("{ not json")
    (study["smoke"] / "run_manifest.json").unlink()  # records left, manifest gone
    empty = study["results"] / "20261206T000000Z-deadbeef"
    empty.mkdir()  # a claimed folder whose run never wrote a manifest
    capsys.readouterr()

    assert main(["runs", str(study["root"])]) == 0
    captured = capsys.readouterr()
    warnings = _lines(captured.err)
    assert warnings == [
        f"rl-harness runs: warning: cannot read run folder {empty}: "
        "no run_manifest.json (it is empty)",
        f"rl-harness runs: warning: cannot read run folder {study['cpu1']}: "
        "run_manifest.json is corrupt (not valid JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 3 (char 2))",
        f"rl-harness runs: warning: cannot read run folder {study['smoke']}: "
        "no run_manifest.json (it holds records)",
    ]
    header, *rows = _lines(captured.out)
    assert [row.split()[0] for row in rows] == ["cpu0"]
    assert rows[0].split()[header.split().index("budget")] == "cpu"

    assert main(["compare", str(study["root"]), "--metric", "value"]) == 0
    captured = capsys.readouterr()
    named = _lines(captured.err)
    assert len(named) == 3 and all("compare: warning: cannot read run folder" in n for n in named)
    assert "left out: cannot read run folder" in captured.out  # the table's notes say so too

    assert main(["show", str(study["cpu1"])]) == 0  # named, and the rest shown
    (line,) = _lines(capsys.readouterr().err)
    assert line.startswith("rl-harness show: warning: ") and str(study["cpu1"]) in line
    assert "run_manifest.json is corrupt (not valid JSON" in line
    with pytest.raises(RunToolError, match="run_manifest.json is corrupt"):
        RunArtifacts.open(study["cpu1"])


def test_runs_shows_smoke_and_budget(study, capsys):
    capsys.readouterr()
    assert main(["runs", str(study["root"])]) == 0
    header, *rows = _lines(capsys.readouterr().out)
    column = header.split().index("budget")
    assert {row.split()[0]: row.split()[column] for row in rows} == {
        "cpu0": "cpu",
        "cpu1": "cpu",
        "smoke": "smoke",
    }


def test_runs_into_a_closed_pipe_ends_quietly(study, tmp_path):
    # More rows than a pipe buffers, so the writer meets the closed pipe for sure.
    many = tmp_path / "many" / "arm" / "results"
    many.mkdir(parents=True)
    for index in range(1500):
        shutil.copytree(study["cpu0"], many / f"run{index:04d}")
    command = f"set -o pipefail; {sys.executable} -m rl_harness.cli runs {many.parent} | head -1"
    done = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.stdout.split()[:2] == ["run", "experiment"]
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"
    assert done.returncode == 1  # Python's documented exit code for EPIPE
    # The same listing, read whole, is every run (the pipe was what ended it early).
    full = subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", "runs", str(many.parent)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert len(full.stdout.splitlines()) == 1501
    assert json.loads((study["cpu0"] / "run_manifest.json").read_text())["options"]["budget"]

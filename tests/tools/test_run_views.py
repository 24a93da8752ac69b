"""`rl-harness runs`, `show` and `diff` on real runs of quick recipes in a temp git repo."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.metrics import read_metrics
from tests.harness import recipes as harness_recipes
from tests.tools import recipes
from tests.tools.helpers import manifest, run_leaf, write_leaf


def _only_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness: error: "), err
    return err[0]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, tuple[str, str, str]]:
    """A git repo with one leaf run three times, once for the module (each run costs seconds):
    seed 1, seed 1 again, then seed 2 with an uncommitted code file in the tree."""
    repo = tmp_path_factory.mktemp("views") / "exp-repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "test@example.com")
    _git(repo, "config", "user.name", "Test")
    (repo / ".gitignore").write_text("**/artifacts/\n")
    leaf = write_leaf(repo, recipes.SEEDED)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "leaf")
    first = run_leaf(leaf, "--seed", "1")
    again = run_leaf(leaf, "--seed", "1")
    (repo / "study" / "scratch.py").write_text("TRY = 1\n")
    dirty = run_leaf(leaf, "--seed", "2")
    return repo, (first.name, again.name, dirty.name)


@pytest.fixture
def three_runs(made, tmp_path: Path):
    """A copy of the made repo (git history included) for one test to add to or break."""
    source, names = made
    repo = tmp_path / "exp-repo"
    shutil.copytree(source, repo)
    leaf = repo / "study" / "leaf" / "experiment.py"
    runs = tuple(leaf.parent / "results" / name for name in names)
    return repo, (lambda *args: _git(repo, *args)), leaf, runs


def test_runs_table_lists_every_run(three_runs, capsys):
    repo, git, _, runs = three_runs
    failing = run_leaf(write_leaf(repo, harness_recipes.FAILING, "broken"))
    capsys.readouterr()
    assert main(["runs", str(repo)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == [
        "run", "experiment", "status", "seed", "budget", "exp", "lib", "duration", "return",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[1:]] == [p.name for p in (*runs, failing)]
    head = git("rev-parse", "HEAD").strip()[:8]
    first, _, dirty, broken = (line.split() for line in lines[1:])
    assert first[1:6] == ["study/leaf", "completed", "1", "-", head]  # no BUDGETS: "-"
    assert dirty[3:6] == ["2", "-", head + "*"]  # '*': the run had uncommitted code
    last_return = read_metrics(runs[0] / "metrics.jsonl")[-1]["env_runners/episode_return_mean"]
    assert first[-1] == f"{last_return:.6g}"
    assert broken[1:4] == ["study/broken", "failed", "42"] and broken[-1] == "-"


def test_runs_handles_empty_and_missing_folders(tmp_path: Path, capsys):
    assert main(["runs", str(tmp_path)]) == 0
    assert "no runs under" in capsys.readouterr().out
    assert main(["runs", str(tmp_path / "absent")]) == 2
    assert "no such folder" in _only_error_line(capsys)


def test_show_text_and_json(three_runs, capsys):
    _, git, _, (first, *_) = three_runs
    capsys.readouterr()
    assert main(["show", str(first)]) == 0
    text = capsys.readouterr().out
    m = manifest(first)
    assert f"run         {first.name}  [completed]" in text
    assert m["experiment_repo"]["commit"][:12] in text and "(clean)" in text
    assert m["library"]["version"] in text and "ray 2.60.0" in text
    rows = read_metrics(first / "metrics.jsonl")
    assert "final metrics (3 rows in metrics.jsonl):" in text
    assert f"{rows[-1]['learners/default_policy/total_loss']:.6g}" in text
    assert "result.json:" in text and "iterations" in text

    assert main(["show", str(first), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["manifest"] == m and shown["final_metrics"] == rows[-1]
    assert shown["metrics_rows"] == 3 and shown["result"] == {"iterations": 3}


def test_run_argument_forms(three_runs, monkeypatch, capsys):
    repo, _, _, (first, _, dirty) = three_runs
    monkeypatch.chdir(repo)
    capsys.readouterr()
    assert main(["show", first.name]) == 0  # a bare run id, searched under the current folder
    assert first.name in capsys.readouterr().out
    assert main(["show", dirty.name[:-3]]) == 0  # a unique prefix
    assert dirty.name in capsys.readouterr().out
    assert main(["show", "2"]) == 2  # every run id starts with the year
    assert "3 runs match '2'" in _only_error_line(capsys)
    assert main(["show", "nosuchrun"]) == 2
    assert "no run 'nosuchrun'" in _only_error_line(capsys)
    assert main(["show", str(repo)]) == 2
    assert "is not a run folder" in _only_error_line(capsys)
    assert main(["show"]) == 2
    assert "required" in _only_error_line(capsys)
    # A corrupt manifest is named in one warning line; the rest of the run is still shown.
    (first / "run_manifest.json").write_text("{torn")
    assert main(["show", str(first)]) == 0
    captured = capsys.readouterr()
    (warning,) = captured.err.strip().splitlines()
    assert warning.startswith(f"rl-harness show: warning: {first / 'run_manifest.json'} is ")
    assert "corrupt (not valid JSON" in warning
    assert "provenance  not shown (run_manifest.json could not be read)" in captured.out
    assert "final metrics (3 rows in metrics.jsonl):" in captured.out


def test_diff_of_two_seeds(three_runs, capsys):
    _, _, _, (first, _, dirty) = three_runs
    capsys.readouterr()
    assert main(["diff", str(first), str(dirty)]) == 1
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()]
    assert ["seed", "1", "->", "2"] in lines and ["options.seed", "1", "->", "2"] in lines
    sha = manifest(dirty)["experiment_repo"]["diff_sha256"]
    assert ["experiment_repo.diff_sha256", "-", "->", sha] in lines
    patch_lines = len((dirty / "experiment_repo.patch").read_text().splitlines())
    assert (
        f"experiment_repo patch: a -  b {sha[:12]}  text differs ({patch_lines} lines differ)"
        in out
    )
    a = read_metrics(first / "metrics.jsonl")[-1]["env_runners/episode_return_mean"]
    b = read_metrics(dirty / "metrics.jsonl")[-1]["env_runners/episode_return_mean"]
    row = next(line for line in lines if line and line[0] == "env_runners/episode_return_mean")
    assert row[1] == f"{a:.6g}" and row[3] == f"{b:.6g}" and row[4] == f"({b - a:.6g})"
    assert "final metrics (timing keys ignored): 2 differ, 1 equal" in out
    assert "time_this_iter_s" not in out and "started_at" not in out
    assert "experiment_repo.commit" not in out  # equal fields are only counted


def test_diff_of_identical_runs(three_runs, capsys):
    _, _, _, (first, again, _) = three_runs
    capsys.readouterr()
    assert main(["diff", str(first), str(again)]) == 0
    out = capsys.readouterr().out
    assert "provenance: 0 differ" in out
    assert "final metrics (timing keys ignored): 0 differ, 3 equal" in out
    assert main(["diff", str(first)]) == 2
    assert "required" in _only_error_line(capsys)

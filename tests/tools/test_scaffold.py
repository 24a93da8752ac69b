"""`rl-harness new`: the scaffolded repo, its example leaf run for real, and its reproduction."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.metrics import read_metrics
from rl_harness.harness.scaffold import (
    LEAF_MODULE,
    LEAF_PATH,
    library_checkout,
    pyproject_text,
    source_path,
)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _only_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness: error: "), err
    return err[0]


def test_new_repo_is_complete_and_committed(tmp_path: Path, capsys):
    repo = tmp_path / "My Experiments"
    assert main(["new", str(repo)]) == 0
    assert f"created {repo}" in capsys.readouterr().out
    for name in ("pyproject.toml", ".gitignore", "README.md", "AGENTS.md", LEAF_PATH):
        assert (repo / name).is_file(), name
    assert (repo / ".python-version").read_text() == "3.13\n"
    for package in ("experiments", "experiments/example_study", "experiments/example_study/smoke"):
        assert (repo / package / "__init__.py").is_file()
    assert _git(repo, "log", "--format=%s") == "Scaffold experiment repo (rl-harness new)"
    assert _git(repo, "status", "--porcelain") == ""  # everything is in the first commit
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"

    project = tomllib.loads((repo / "pyproject.toml").read_text())
    assert project["project"]["name"] == "my-experiments"
    assert project["project"]["dependencies"] == ["rl-harness"]
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["experiments"]
    library = library_checkout()
    if library is not None:  # this suite runs from a library checkout
        source = project["tool"]["uv"]["sources"]["rl-harness"]
        assert source == {"path": str(library), "editable": True}
        assert (Path(source["path"]) / "src" / "rl_harness" / "__init__.py").is_file()

    ignored = repo / "experiments/example_study/smoke/artifacts/run/ckpt.bin"
    ignored.parent.mkdir(parents=True)
    ignored.write_bytes(b"x")
    kept = repo / "experiments/example_study/smoke/results/run/summary.json"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")
    assert _git(repo, "status", "--porcelain", "--untracked-files=all") == (
        "?? experiments/example_study/smoke/results/run/summary.json"
    )
    assert LEAF_MODULE in (repo / "README.md").read_text()


def test_library_source_forms(tmp_path: Path):
    assert source_path(tmp_path / "exp", tmp_path / "rl-harness") == "../rl-harness"
    assert source_path(tmp_path / "a" / "exp", tmp_path / "lib") == str(tmp_path / "lib")
    plain = tomllib.loads(pyproject_text("exp", None))
    assert plain["project"]["dependencies"] == ["rl-harness"] and "uv" not in plain.get("tool", {})
    sibling = tomllib.loads(pyproject_text("exp", "../rl-harness"))
    assert sibling["tool"]["uv"]["sources"]["rl-harness"] == {
        "path": "../rl-harness",
        "editable": True,
    }


def test_new_refuses_bad_targets(tmp_path: Path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["new", str(tmp_path / "full")]) == 2
    assert "exists and is not empty" in _only_error_line(capsys)
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["keep.txt"]
    (tmp_path / "file").write_text("")
    assert main(["new", str(tmp_path / "file")]) == 2
    assert "exists and is not a folder" in _only_error_line(capsys)
    assert main(["new", str(tmp_path / "x"), "--name", "!!!"]) == 2
    assert "cannot derive a project name" in _only_error_line(capsys)
    assert main(["new"]) == 2
    assert "required" in _only_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["new", str(tmp_path / "empty")]) == 0  # an empty folder is fine


def test_new_without_git_identity(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    assert main(["new", str(tmp_path / "repo")]) == 0
    assert "no git identity configured" in capsys.readouterr().out
    assert _git(tmp_path / "repo", "log", "--format=%ae") == "rl-harness-new@localhost"


@pytest.fixture(scope="module")
def scaffolded_run(tmp_path_factory):
    """A new repo whose example leaf ran once in smoke mode (a real PPO run, own process)."""
    repo = tmp_path_factory.mktemp("scaffold") / "exp"
    library = library_checkout()
    library_head = _git(library, "rev-parse", "HEAD") if library else None
    assert main(["new", str(repo)]) == 0
    out = subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", LEAF_PATH, "--smoke"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run_dir,) = (repo / LEAF_PATH).parent.joinpath("results").iterdir()
    return repo, run_dir, library_head


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return (
        subprocess.run(
            ["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer]
        ).returncode
        == 0
    )


def test_scaffolded_example_records_both_commits(scaffolded_run):
    repo, run_dir, library_head = scaffolded_run
    m = json.loads((run_dir / "run_manifest.json").read_text())
    assert m["status"] == "completed" and m["experiment"]["module"] == LEAF_MODULE
    assert m["options"]["smoke"] is True and m["hardware"]["plan"]["num_env_runners"] == 0
    exp = m["experiment_repo"]
    assert exp["root"] == str(repo.resolve()) and exp["commit"] == _git(repo, "rev-parse", "HEAD")
    assert exp["diff_sha256"] is None  # the scaffold is committed, nothing uncommitted ran
    lib = m["library"]
    assert lib["same_repo_as_experiment"] is False
    library = library_checkout()
    if library is not None:
        assert lib["root"] == str(library)
        # Others may commit to the library meanwhile: the recorded commit lies between.
        assert lib["commit"] != exp["commit"]
        assert _is_ancestor(library, library_head, lib["commit"])
        assert _is_ancestor(library, lib["commit"], "HEAD")
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["training_iteration"] for r in rows] == [1, 2]
    assert rows[-1]["num_env_steps_sampled_lifetime"] == 400
    assert isinstance(rows[-1]["env_runners/episode_return_mean"], float)


@pytest.mark.slow  # a second PPO run in its own process (40-80 s on 2 cores)
def test_scaffolded_example_reproduces_bit_for_bit(scaffolded_run, capfd):
    """Same seed, CPU, num_env_runners=0: RLlib PPO repeats its metrics exactly."""
    _, run_dir, _ = scaffolded_run
    capfd.readouterr()
    code = main(["reproduce", str(run_dir)])
    out, err = capfd.readouterr()
    assert code == 0, out[-3000:] + err[-3000:]
    assert "metrics: identical (2 recorded rows, 2 new" in out
    assert "refused" not in err


@pytest.mark.parametrize("template", ["cartpole", "hmm-probe"])
def test_the_scaffolded_repo_passes_its_own_ruff(tmp_path: Path, template, capsys):
    # Its ruff configuration (pyproject) and its leaves agree: import order included.
    repo = tmp_path / "exp"
    assert main(["new", str(repo), "--template", template]) == 0
    ruff = Path(sys.executable).parent / "ruff"
    for command in (["check", "."], ["format", "--check", "."]):
        out = subprocess.run([str(ruff), *command], cwd=repo, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
    assert (repo / "tests" / "test_example_leaf.py").is_file()
    # Not a vacuous pass: the same leaf with rl_harness sorted among the other third-party
    # imports, as ruff would without the repo's configuration, is refused.
    leaf = repo / LEAF_PATH
    text = leaf.read_text()
    leaf.write_text(text.replace("\n\nfrom rl_harness import", "\nfrom rl_harness import", 1))
    out = subprocess.run([str(ruff), "check", "."], cwd=repo, capture_output=True, text=True)
    assert out.returncode == 1 and "I001" in out.stdout


@pytest.mark.slow  # a real PPO smoke run inside the shipped test (30-90 s on 2 cores)
def test_the_scaffolded_repo_ships_a_passing_test(tmp_path: Path, capsys):
    repo = tmp_path / "exp"
    assert main(["new", str(repo)]) == 0
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 passed" in out.stdout

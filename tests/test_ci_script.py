"""The checks the repository promises: .ci/run lints, type-checks (mypy, strict on src/) and
then tests; the pre-commit configuration runs the same lint and type checks locally."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CI_SCRIPT = ROOT / ".ci" / "run"
PRE_COMMIT = ROOT / ".pre-commit-config.yaml"


def _ci_commands() -> list[str]:
    """The commands .ci/run runs, one per line, comments and shell structure left out."""
    commands = []
    for line in CI_SCRIPT.read_text(encoding="utf-8").splitlines():
        words = shlex.split(line, comments=True)
        if words[:3] == ["python3", "-m", "uv"]:
            commands.append(" ".join(words[3:]))
    return commands


def _position(commands: list[str], command: str) -> int:
    matches = [i for i, c in enumerate(commands) if c == command]
    assert len(matches) == 1, f".ci/run should run `uv {command}` once; it runs {commands}"
    return matches[0]


def test_ci_runs_mypy_after_ruff_and_before_the_tests() -> None:
    commands = _ci_commands()
    lint = _position(commands, "run ruff check .")
    formatted = _position(commands, "run ruff format --check .")
    types = _position(commands, "run mypy")
    tests = _position(commands, "run pytest -q -m not slow")  # shlex took the quotes off
    assert lint < types and formatted < types < tests, commands


def test_mypy_is_strict_on_the_whole_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True
    assert config["files"] == ["src/rl_harness"]
    for override in config.get("overrides", []):
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        # Relaxations are for third-party packages; our own modules are never exempted.
        assert not [m for m in modules if m.startswith("rl_harness")], override
        assert "ignore_errors" not in override, override


def test_the_project_configuration_refuses_untyped_code(tmp_path: Path) -> None:
    (tmp_path / "untyped.py").write_text("def double(x):\n    return 2 * x\n", encoding="utf-8")
    (tmp_path / "typed.py").write_text(
        "def double(x: int) -> int:\n    return 2 * x\n", encoding="utf-8"
    )
    # The project's configuration; files named on the command line replace its `files`.
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "untyped.py",
            "typed.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert errors and all(line.startswith("untyped.py:1:") for line in errors), errors
    assert "[no-untyped-def]" in errors[0]


def test_pre_commit_runs_ruff_and_mypy_from_the_project_environment(tmp_path: Path) -> None:
    config = yaml.safe_load(PRE_COMMIT.read_text(encoding="utf-8"))
    # Local hooks only: nothing is fetched from a hook repository at run time.
    assert [repo["repo"] for repo in config["repos"]] == ["local"]
    hooks = {hook["id"]: hook for hook in config["repos"][0]["hooks"]}
    assert hooks["ruff-check"]["entry"] == "python3 -m uv run ruff check"
    assert hooks["ruff-format"]["entry"] == "python3 -m uv run ruff format --check"
    assert hooks["mypy"]["entry"] == "python3 -m uv run mypy"
    assert hooks["mypy"]["pass_filenames"] is False  # the configured package, whole
    assert {hook["language"] for hook in hooks.values()} == {"system"}

    # pre-commit's own schema check (its real client, from the dev environment).
    checked = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", str(PRE_COMMIT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit")},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

"""examples/rl-experiments/scripts/bootstrap_local.sh, run for real in temp folders.

The full flow (`uv sync` into a fresh .venv, then `uv run` of the example leaf) is `slow`: it
installs the whole dependency set, which takes seconds from uv's cache but ~3 GB of downloads
without one. The guards before `uv sync` are checked in the fast suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTER = REPO / "examples" / "rl-experiments"
SCRIPT = Path("scripts") / "bootstrap_local.sh"
LEAF_MODULE = "experiments.example_study.smoke.experiment"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT")}
    # Pin uv to the interpreter this suite runs on (no Python downloads, no shim lookups).
    base = os.path.realpath(sys._base_executable)
    env["UV_PYTHON"] = base
    # `python3 -m pip install uv` puts uv beside that interpreter; in a folder without
    # .python-version a pyenv shim for `uv` or `python3` finds another Python without it.
    if (Path(base).parent / "uv").exists():
        env["PATH"] = os.pathsep.join([str(Path(base).parent), env.get("PATH", "")])
    env.update(extra)
    return env


def starter_copy(parent: Path) -> Path:
    """The starter repo as a fork would have it: its own git repo, no earlier results."""
    repo = parent / "my-experiments"
    shutil.copytree(
        STARTER,
        repo,
        ignore=shutil.ignore_patterns("results", "artifacts", "__pycache__", ".venv", "uv.lock"),
    )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "fork")
    return repo


def bootstrap(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(repo / SCRIPT), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_refuses_a_sibling_that_is_not_the_library(tmp_path: Path):
    repo = starter_copy(tmp_path)
    (tmp_path / "rl-harness").mkdir()
    (tmp_path / "rl-harness" / "README.md").write_text("something else\n")
    out = bootstrap(repo, _env())
    assert out.returncode == 2
    assert "is not an rl-harness checkout" in out.stderr
    assert "workspace = true" in (repo / "pyproject.toml").read_text()  # untouched


def test_failed_clone_is_one_clear_error(tmp_path: Path):
    repo = starter_copy(tmp_path)
    out = bootstrap(repo, _env(RL_HARNESS_URL=str(tmp_path / "no-such-library")))
    assert out.returncode == 2
    assert f"cloning {tmp_path / 'no-such-library'} failed" in out.stderr
    assert not (tmp_path / "rl-harness").exists()


def test_missing_library_without_url_is_one_clear_error(tmp_path: Path):
    repo = starter_copy(tmp_path)
    env = _env()
    env.pop("RL_HARNESS_URL", None)
    out = bootstrap(repo, env)
    assert out.returncode == 2
    assert "set RL_HARNESS_URL" in out.stderr and "git clone" not in out.stdout
    assert not (tmp_path / "rl-harness").exists()


def test_refuses_a_pyproject_without_a_library_source(tmp_path: Path):
    repo = starter_copy(tmp_path)
    text = (repo / "pyproject.toml").read_text().replace("rl-harness = { workspace = true }\n", "")
    (repo / "pyproject.toml").write_text(text)
    subprocess.run(["git", "clone", "-q", str(REPO), str(tmp_path / "rl-harness")], check=True)
    out = bootstrap(repo, _env())
    assert out.returncode == 2 and "has no rl-harness path source" in out.stderr


@pytest.mark.slow
def test_bootstrap_then_run_the_example(tmp_path: Path):
    origin = tmp_path / "origin" / "rl-harness"
    subprocess.run(["git", "clone", "-q", str(REPO), str(origin)], check=True)
    repo = starter_copy(tmp_path)
    out = bootstrap(repo, _env(RL_HARNESS_URL=str(origin)))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    library = tmp_path / "rl-harness"
    assert _git(library, "rev-parse", "HEAD") == _git(origin, "rev-parse", "HEAD")
    source = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["uv"]["sources"]
    assert source["rl-harness"] == {"path": "../rl-harness", "editable": True}
    assert (repo / "uv.lock").is_file() and (repo / ".venv").is_dir()

    again = bootstrap(repo, _env(RL_HARNESS_URL=str(tmp_path / "unused")))  # idempotent
    assert again.returncode == 0 and "cloning" not in again.stdout, again.stderr[-3000:]

    uv = ["uv"] if shutil.which("uv") else [sys.executable, "-m", "uv"]
    run = subprocess.run(
        [*uv, "run", "--frozen", "rl-harness", LEAF_MODULE, "--smoke"],
        cwd=repo,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (run_dir,) = (repo / "experiments/example_study/smoke/results").iterdir()
    m = json.loads((run_dir / "run_manifest.json").read_text())
    assert m["status"] == "completed" and m["experiment"]["module"] == LEAF_MODULE
    assert m["experiment_repo"]["root"] == str(repo)
    assert m["experiment_repo"]["commit"] == _git(repo, "rev-parse", "HEAD")
    # The library ran from the sibling clone, editable: its commit is recorded on its own.
    assert m["library"]["root"] == str(library) and m["library"]["same_repo_as_experiment"] is False
    assert m["library"]["commit"] == _git(library, "rev-parse", "HEAD")
    assert m["lockfile"]["path"] == str(repo / "uv.lock")


@pytest.mark.slow
def test_bootstrap_inside_the_library_syncs_the_workspace(tmp_path: Path):
    library = tmp_path / "rl-harness"
    subprocess.run(["git", "clone", "-q", str(REPO), str(library)], check=True)
    member = library / "examples" / "rl-experiments"
    (member / "scripts").mkdir(exist_ok=True)
    shutil.copy2(STARTER / SCRIPT, member / SCRIPT)  # this checkout's version of the script
    out = bootstrap(member, _env())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"bundled in the rl-harness checkout {library}" in out.stdout
    assert (library / ".venv").is_dir() and not (member / ".venv").exists()
    assert "workspace = true" in (member / "pyproject.toml").read_text()

"""Shared pytest fixtures."""

from __future__ import annotations

import os

# Keep Ray quiet and local in tests; never let a test reach a user's cluster.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.pop("RAY_ADDRESS", None)
# Workers reuse this interpreter, as the harness's own local Ray does (no `uv run` per worker).
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
# Tiny test networks: one intra-op thread beats oversubscribing 2 cores (measured 4.2 s vs
# 0.47 s per PPO iteration under load). Set before torch loads; subprocesses inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import signal
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session: starting Ray costs seconds on 2 cores."""
    import ray

    from rl_harness.harness.rayinit import start_local_ray

    if not ray.is_initialized():  # the harness's start: longer waits, a retry on a busy machine
        start_local_ray(include_dashboard=False, num_cpus=2, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for one test, whatever SIGINT was at launch.

    A suite started as a background job of a non-interactive shell inherits SIGINT ignored,
    and Python then keeps ignoring it: a real SIGINT sent by a test would do nothing.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def git_repo(tmp_path: Path):
    """A fresh experiment repo with one commit; returns (root, git)."""
    root = tmp_path / "exp-repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "test@example.com")
    _git(root, "config", "user.name", "Test")
    (root / "README.md").write_text("experiments\n")
    (root / ".gitignore").write_text("**/artifacts/\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "init")
    return root, lambda *args: _git(root, *args)

"""Fixtures for the vast tooling tests: a fake vast server, local git remotes, stand-ins."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fake_vast import FakeVast, make_offers  # noqa: E402
from vast_support import API_KEY, GIT_ENV, git  # noqa: E402

from rl_harness.devops.vast import client as vast_client  # noqa: E402
from rl_harness.devops.vast.client import RequestPolicy  # noqa: E402


@dataclass
class Repos:
    exp_remote: Path
    lib_remote: Path
    exp: Path  # local checkout (origin = exp_remote)
    lib: Path
    exp_commit: str
    lib_commit: str


def _make_repo(root: Path, name: str, files: dict[str, str]) -> tuple[Path, Path, str]:
    remote = root / "remotes" / f"{name}.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    local = root / "local" / name
    local.mkdir(parents=True)
    git(local, "init", "-q", "-b", "main")
    for rel, text in files.items():
        path = local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(local, "add", "-A")
    git(local, "commit", "-q", "-m", f"initial {name}")
    git(local, "remote", "add", "origin", str(remote))
    git(local, "push", "-q", "origin", "main")
    git(local, "fetch", "-q", "origin")
    return remote, local, git(local, "rev-parse", "HEAD")


@pytest.fixture
def repos(tmp_path: Path) -> Repos:
    exp_remote, exp, exp_commit = _make_repo(
        tmp_path,
        "my-experiments",
        {
            "pyproject.toml": '[project]\nname = "my-experiments"\n',
            "uv.lock": "# stand-in lock\n",
            ".gitignore": ".venv/\n**/artifacts/\n",
            "experiments/__init__.py": "",
            "experiments/demo/leaf/experiment.py": "def run(context):\n    return {}\n",
        },
    )
    lib_remote, lib, lib_commit = _make_repo(
        tmp_path,
        "rl-harness",
        {"pyproject.toml": '[project]\nname = "rl-harness"\n', "src/rl_harness/__init__.py": ""},
    )
    return Repos(exp_remote, lib_remote, exp, lib, exp_commit, lib_commit)


STAND_IN_UV = r"""#!/usr/bin/env bash
# Stand-in for `uv` on the box: `sync` does nothing, `run rl-harness ...` fakes a recipe run.
set -u
printf '%s\t%s\t%s\t%s\t%s\n' "$PWD" "${TMUX:+tmux}" "${CONTAINER_API_KEY:+LEAKED}" "$*" \
  "$(git rev-parse HEAD 2>/dev/null)" >> "$RLH_STANDIN_LOG"
case "${1:-}" in
  sync) exit 0 ;;
  run) shift ;;
  *) echo "stand-in uv: unexpected $*" >&2; exit 2 ;;
esac
[ "${1:-}" = rl-harness ] || { echo "stand-in uv: expected rl-harness, got $*" >&2; exit 2; }
shift
if [ "${1:-}" = upload ]; then exit 0; fi
module=$1; shift
seed=42
while [ $# -gt 0 ]; do if [ "$1" = --seed ]; then seed=$2; fi; shift; done
leaf=$(echo "${module%.*}" | tr . /)
run_id="run-seed$seed-$$"
mkdir -p "$leaf/results/$run_id" "$leaf/artifacts/$run_id"
echo large > "$leaf/artifacts/$run_id/weights.bin"
status=completed
if [ "${RLH_STANDIN_EXIT:-0}" != 0 ]; then status=failed; fi
printf '{"run_id": "%s", "seed": %s, "status": "%s"}\n' "$run_id" "$seed" "$status" \
  > "$leaf/results/$run_id/run_manifest.json"
echo "stand-in run of $module seed $seed ${RLH_STANDIN_ECHO:-}"
sleep "${RLH_STANDIN_SLEEP:-0}"
exit "${RLH_STANDIN_EXIT:-0}"
"""


@pytest.fixture
def stand_ins(tmp_path: Path) -> Path:
    """A bin folder whose `uv` replaces only the expensive sync/run steps."""
    bin_dir = tmp_path / "stand-in-bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(STAND_IN_UV)
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


@pytest.fixture
def box_env(tmp_path: Path, stand_ins: Path):
    """Environment of a fake box: stand-ins first on PATH, its own work dir and tmux."""

    def make(work_name: str, instance_id: int, scoped_key: str, **extra: str) -> dict:
        work = tmp_path / "boxes" / work_name
        home = tmp_path / "home"
        tmux_dir = work / "tmux"  # one tmux server per box, as on real boxes
        for d in (work, home, tmux_dir):
            d.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VAST_API_KEY", "TMUX")}
        env.update(GIT_ENV)
        env.update(
            PATH=f"{stand_ins}:{env.get('PATH', '/usr/bin:/bin')}",
            HOME=str(home),
            RLH_WORK=str(work),
            RLH_NO_CONTAINER_LOG="1",
            TMUX_TMPDIR=str(tmux_dir),
            RLH_STANDIN_LOG=str(work / "stand-in.log"),
            CONTAINER_ID=str(instance_id),
            CONTAINER_API_KEY=scoped_key,
        )
        env.update(extra)
        return env

    return make


@pytest.fixture
def fake_vast():
    server = FakeVast(api_key=API_KEY, offers=make_offers())
    yield server
    server.close()


# The CLI's request policy with waits scaled down (vast's documented intervals are seconds):
# the same code paths, no idle test time. Policy tests inject a clock instead.
FAST_POLICY = RequestPolicy(spacing_s={}, max_wait_s=5.0, backoff_s=0.02)


@pytest.fixture
def vast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_vast: FakeVast) -> Path:
    """Point the CLI at the fake server with the main key; returns the state dir."""
    state_dir = tmp_path / "state"
    monkeypatch.setattr(vast_client, "DEFAULT_POLICY", FAST_POLICY)
    monkeypatch.setenv("VAST_API_KEY", API_KEY)
    monkeypatch.setenv("VAST_URL", fake_vast.url)
    monkeypatch.setenv("RLH_VAST_STATE_DIR", str(state_dir))
    for name in list(os.environ):
        if name.startswith(("B2_", "AWS_", "RL_HARNESS_B2")) or name in ("GH_TOKEN", "GIT_TOKEN"):
            monkeypatch.delenv(name)
    return state_dir

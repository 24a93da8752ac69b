"""Ray's start on a busy machine (issue 51 item 2), through the CLI in a real subprocess.

- Under an artificial CPU load (busy-loop processes this test starts and stops), a real
  PPO recipe starts Ray and completes.
- When Ray cannot start (its own GCS wait set to 0 s, a setting the harness keeps), the run
  tries twice, then fails with one `rl-harness: error:` line naming the load average, its
  record `failed` with the traceback in error.txt.

Both start Ray more than once: `slow`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.harness import recipes
from tests.tools.helpers import run_dirs, write_leaf

CLI = [sys.executable, "-m", "rl_harness.cli"]
BUSY = "while True: pass"


def _run(leaf, cwd, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, str(leaf), "--no-upload-artifacts"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1200,
        env=os.environ | {"RAY_AUTH_MODE": "disabled"} | env,
    )


@pytest.mark.slow  # two Ray starts: 3.5 min at a load of 20 on 2 cores
def test_a_ray_that_cannot_start_is_tried_twice_then_one_line_naming_the_load(git_repo):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.PPO_TINY)
    git("add", "-A")
    git("commit", "-qm", "leaf")
    done = _run(leaf, repo, RAY_gcs_server_port_wait_time_s="0")
    assert done.returncode == 1, done.stderr[-3000:]
    err = done.stderr.strip().splitlines()
    errors = [line for line in err if line.startswith("rl-harness: error: ")]
    assert len(errors) == 1, err
    assert errors[0].startswith("rl-harness: error: Ray did not start in 2 tries (load average ")
    assert " on " in errors[0] and " CPUs; " in errors[0]
    assert sum("trying once more" in line for line in err) == 1  # the one retry, said
    assert "Traceback" not in done.stderr
    (run,) = run_dirs(leaf)
    record = json.loads((run / "run_manifest.json").read_text())
    assert record["status"] == "failed" and record["error"]["type"] == "RayStartError"
    assert "Traceback" in (run / "error.txt").read_text()


@pytest.mark.slow
def test_ray_starts_and_the_run_completes_under_cpu_load(git_repo):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.PPO_TINY)
    git("add", "-A")
    git("commit", "-qm", "leaf")
    # Eight busy loops on top of whatever already runs here: a load of 8 more per 2 cores.
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(8)]
    try:
        done = _run(leaf, repo)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "starting a local Ray (try 1 of 2" in done.stdout
    (run,) = run_dirs(leaf)
    assert json.loads((run / "run_manifest.json").read_text())["status"] == "completed"

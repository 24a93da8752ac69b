"""Each fault of issue 51 item 3 (and the smaller input faults of item 5) gives one
`rl-harness: error:` line with the right exit code, through the CLI a user runs.

- a `--ray-address` nothing answers at, an unknown host, a Ray Client `ray://` address or
  garbage: exit 2 in seconds, before the recipe is imported, no run folder;
- SIGTERM while Ray starts: exit 143, the run recorded `interrupted` (as SIGINT is);
- `rl-harness TARGET | head -1`: no "Logging error" tracebacks, the run still recorded;
- a helper module failing at import names its file and line; `--set sizes=` is refused and
  the tuple / `| None` errors show how to write a value; `--log-to wandb` without wandb is
  refused with the options; `train(overrides=...)` given a str or dict is one clear error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.lifecycle import train
from tests.harness import recipes
from tests.harness.test_budgets import BUDGETED
from tests.tools.helpers import run_dirs, write_leaf

CLI = [sys.executable, "-m", "rl_harness.cli"]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rl-harness: error: "), err
    return err[0]


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("127.0.0.1:1", "--ray-address 127.0.0.1:1: no Ray cluster answers there"),
        ("no-such-host.invalid:6379", "unknown host 'no-such-host.invalid'"),
        ("ray://127.0.0.1:10001", "a Ray Client (ray://) address is not supported"),
        ("garbage", "--ray-address takes HOST:PORT"),
        ("127.0.0.1:99999", "--ray-address takes HOST:PORT"),
    ],
)
def test_a_bad_ray_address_is_one_line_in_seconds(git_repo, capsys, address, said):
    repo, _ = git_repo
    leaf = write_leaf(repo, recipes.PPO_TINY)
    started = time.monotonic()
    assert main([str(leaf), "--ray-address", address, "--no-upload-artifacts"]) == 2
    assert time.monotonic() - started < 30  # Ray itself retried a dead address for minutes
    assert said in _one_error_line(capsys)
    assert run_dirs(leaf) == []  # refused before any folder


def test_a_ray_address_from_the_environment_is_checked_alike(git_repo, capsys, monkeypatch):
    repo, _ = git_repo
    leaf = write_leaf(repo, recipes.PPO_TINY)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    assert main([str(leaf), "--no-upload-artifacts"]) == 2
    assert "no Ray cluster answers there" in _one_error_line(capsys)


def _start(argv: list[str], cwd: Path) -> subprocess.Popen:
    env = os.environ | {"RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [*CLI, *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: signalled alone, as `kill` would
    )


def test_sigterm_while_ray_starts_is_recorded_interrupted(git_repo):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.PPO_TINY)
    git("add", "-A")
    git("commit", "-qm", "leaf")
    process = _start([str(leaf), "--no-upload-artifacts"], repo)
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the progress line before Ray's start
            if "starting a local Ray (try 1 of 2" in line:
                break
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 143, err[-3000:]
    (run,) = run_dirs(leaf)
    record = json.loads((run / "run_manifest.json").read_text())
    assert record["status"] == "interrupted"
    assert record["error"] == {
        "type": "RunInterrupted",
        "signal": "SIGTERM",
        "message": "received SIGTERM",
    }
    assert not (run / "metrics.jsonl").exists()  # it never trained
    assert "Traceback" not in err and "SystemExit" not in err


# The first line comes at once; the later ones after the reader (`head -1`) has left.
CHATTY = """
import time
from rl_harness.harness.console import get_logger

def run(context):
    time.sleep(3)
    for i in range(20):
        get_logger("rl_harness.recipe").info(f"line {i}")
    return {"done": 1}
"""


def test_a_reader_that_leaves_ends_the_console_quietly(git_repo):
    repo, git = git_repo
    leaf = write_leaf(repo, CHATTY)
    git("add", "-A")
    git("commit", "-qm", "leaf")
    command = f"{' '.join(CLI)} {leaf} --no-upload-artifacts | head -1"
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert len(done.stdout.splitlines()) == 1
    assert "Logging error" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stderr == ""
    assert done.returncode == 0  # the run completed: its own exit code
    (run,) = run_dirs(leaf)
    assert json.loads((run / "run_manifest.json").read_text())["status"] == "completed"


HELPER_USER = """
import broken_helper_for_test

def run(context):
    return {}
"""
HELPER = """
VALUE = 1

raise RuntimeError("the helper broke at import")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_a_helper_failing_at_import_names_its_file_and_line(git_repo, capsys, verbose):
    repo, _ = git_repo
    leaf = write_leaf(repo, HELPER_USER, f"helper_{verbose}")
    helper = leaf.parent / "broken_helper_for_test.py"
    helper.write_text(HELPER)
    sys.modules.pop("broken_helper_for_test", None)
    try:
        code = main([str(leaf), "--no-upload-artifacts", *(["--verbose"] if verbose else [])])
    finally:
        sys.modules.pop("broken_helper_for_test", None)
        sys.path.remove(str(leaf.parent))
    assert code == 2
    out, err = capsys.readouterr()
    err = err.strip().splitlines()
    assert err[-1].startswith("rl-harness: error: importing ")
    assert "RuntimeError: the helper broke at import" in err[-1]
    assert f"(at {helper}:4)" in err[-1]
    assert len(err) == 1
    # --verbose: the whole traceback too, among the debug lines
    assert ("Traceback (most recent call last)" in out) is verbose


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("sizes=", "--set sizes=: expected comma-separated values, got nothing"),
        ("sizes=1,x", "expected an integer (sizes is tuple[int, ...]; write sizes=3,3)"),
        ("cap=lots", "(cap is int | None; write cap=3 or cap=none)"),
    ],
)
def test_set_values_a_type_cannot_take_show_the_syntax(git_repo, capsys, setting, said):
    repo, _ = git_repo
    leaf = write_leaf(repo, BUDGETED)
    assert main([str(leaf), "--set", setting, "--no-upload-artifacts"]) == 2
    assert said in _one_error_line(capsys)
    assert run_dirs(leaf) == []


# `sys.modules["wandb"] = None` is Python's own way of saying a module cannot be imported.
WITHOUT_WANDB = "import sys; sys.modules['wandb'] = None; from rl_harness.cli import main; " + (
    "sys.exit(main())"
)


def test_log_to_a_tracker_that_is_not_installed_is_refused_before_the_run(git_repo):
    repo, _ = git_repo
    leaf = write_leaf(repo, recipes.QUICK)
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_WANDB, str(leaf), "--log-to", "wandb"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert err == [
        "rl-harness: error: --log-to wandb needs the wandb package, which is not installed "
        "in this environment (uv add wandb)"
    ]
    assert run_dirs(leaf) == []  # no run folder, so no manifest listing it


@pytest.mark.parametrize("given", ["iterations=3", {"iterations": 3}])
def test_train_overrides_given_a_str_or_dict_is_one_clear_error(git_repo, given):
    repo, _ = git_repo
    leaf = write_leaf(repo, BUDGETED)
    with pytest.raises(ValueError, match=r"overrides takes a sequence of 'KEY=VALUE' strings"):
        train(str(leaf), overrides=given)
    assert run_dirs(leaf) == []

"""Real PPO runs under `rl-harness`, stopped by SIGTERM/SIGINT sent to the driver alone or to its
whole process group (as `timeout`, systemd, Slurm and container runtimes do), then resumed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl_harness.harness.metrics import read_metrics
from tests.harness import recipes

CLI = Path(sys.executable).parent / "rl-harness"
REPO = Path(__file__).resolve().parents[2]
UV = os.environ.get("UV") or shutil.which("uv")
BUDGET = 6
NATIVE_DUMP = ("*** SIGTERM received", "PC: @")


def _leaf(tmp_path: Path, source: str) -> Path:
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(source)
    return leaf


def _runs(leaf: Path) -> list[Path]:
    results = leaf.parent / "results"
    return sorted(results.iterdir()) if results.exists() else []


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _start(leaf: Path, *args: str, under_uv: bool = False) -> subprocess.Popen:
    # Under `uv run`, Ray's uv hook would start every worker with `uv run` unless told not to.
    prefix = [UV, "run", "--no-sync", "--project", str(REPO), "rl-harness"] if under_uv else []
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_UV_RUN_RUNTIME_ENV"}
    return subprocess.Popen(
        [*(prefix or [str(CLI)]), str(leaf), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a job under a supervisor
    )


def _wait_for_metrics_row(leaf: Path, proc: subprocess.Popen) -> Path:
    deadline = time.monotonic() + 240
    while True:
        runs = _runs(leaf)
        if runs and (runs[0] / "metrics.jsonl").exists():
            if (runs[0] / "metrics.jsonl").read_text().strip():
                return runs[0]
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            pytest.fail(f"no metrics row (exit {proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}")
        time.sleep(0.1)


def _signal_until_records_final(proc: subprocess.Popen, run_dir: Path, signum: int) -> None:
    """Keep signalling the group every 0.2 s until the manifest is final: later signals land
    while the run saves its checkpoint and writes its records, and must change nothing."""
    manifest = run_dir / "run_manifest.json"
    deadline = time.monotonic() + 180
    while proc.poll() is None and time.monotonic() < deadline:
        if _json(manifest)["status"] != "running":
            return
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _assert_interrupted(run_dir: Path, signum: int, code: int, proc_code: int, err: str) -> dict:
    name = signal.Signals(signum).name
    assert proc_code == code, err[-3000:]
    manifest = _json(run_dir / "run_manifest.json")
    summary = _json(run_dir / "summary.json")
    assert manifest["status"] == summary["status"] == "interrupted"
    assert manifest["error"] == {
        "type": "RunInterrupted",
        "signal": name,
        "message": f"received {name}",
    }
    for marker in NATIVE_DUMP:
        assert marker not in err
    return summary


def test_sigterm_to_process_group_then_resume_to_full_budget(tmp_path: Path):
    """The fast real-Ray case: group SIGTERM (repeated during cleanup), checkpoint, resume."""
    leaf = _leaf(tmp_path, recipes.PPO_SIGNALLED)
    proc = _start(leaf)
    run_dir = _wait_for_metrics_row(leaf, proc)
    os.killpg(proc.pid, signal.SIGTERM)
    _signal_until_records_final(proc, run_dir, signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    summary = _assert_interrupted(run_dir, signal.SIGTERM, 143, proc.returncode, err)

    rows = read_metrics(run_dir / "metrics.jsonl")
    saved = summary["iterations"]
    assert 1 <= saved < BUDGET
    assert [r["training_iteration"] for r in rows] == list(range(1, saved + 1))
    artifacts = _json(run_dir / "run_manifest.json")["artifacts"]["local"]
    checkpoint = Path(artifacts) / summary["final_checkpoint"]
    assert checkpoint.name == f"iter_{saved:06d}"
    assert (checkpoint / "rllib_checkpoint.json").exists()

    resumed = subprocess.run(
        [str(CLI), str(leaf), "--resume-from", str(checkpoint)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (second,) = (run for run in _runs(leaf) if run != run_dir)
    assert _json(second / "run_manifest.json")["status"] == "completed"
    again = read_metrics(second / "metrics.jsonl")
    assert [r["training_iteration"] for r in again] == list(range(saved + 1, BUDGET + 1))
    assert _json(second / "summary.json")["iterations"] == BUDGET


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "code", "whole_group"),
    [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False), (signal.SIGINT, 130, False)],
)
def test_signal_direct_runner(tmp_path: Path, signum: int, code: int, whole_group: bool):
    leaf = _leaf(tmp_path, recipes.PPO_SIGNALLED)
    proc = _start(leaf)
    run_dir = _wait_for_metrics_row(leaf, proc)
    (os.killpg if whole_group else os.kill)(proc.pid, signum)
    _, err = proc.communicate(timeout=180)
    summary = _assert_interrupted(run_dir, signum, code, proc.returncode, err)
    assert Path(summary["final_checkpoint"]).name == f"iter_{summary['iterations']:06d}"


@pytest.mark.slow
@pytest.mark.skipif(UV is None, reason="needs the uv binary")
def test_sigterm_to_process_group_under_tune_then_resume(tmp_path: Path):
    """Also: under `uv run`, the local Tune trial worker runs the driver's interpreter."""
    leaf = _leaf(tmp_path, recipes.PPO_TUNE_SIGNALLED)
    proc = _start(leaf, under_uv=True)
    run_dir = _wait_for_metrics_row(leaf, proc)
    os.killpg(proc.pid, signal.SIGTERM)
    _signal_until_records_final(proc, run_dir, signal.SIGTERM)
    out, err = proc.communicate(timeout=240)
    summary = _assert_interrupted(run_dir, signal.SIGTERM, 143, proc.returncode, err)
    (trial,) = summary["trials"]
    assert trial["status"] == "interrupted" and 1 <= trial["iterations"] < BUDGET
    assert trial["checkpoint"] is not None  # saved at the first result after the signal
    artifacts = _json(run_dir / "run_manifest.json")["artifacts"]["local"]
    experiment = Path(artifacts) / summary["experiment_path"]
    assert f"--resume-from {experiment}" in out
    driver = _json(run_dir / "run_manifest.json")["command"]["executable"]
    (trial_result,) = experiment.glob("*/result.json")
    rows = [json.loads(line) for line in trial_result.read_text().splitlines()]
    assert {row["worker_executable"] for row in rows} == {driver}
    first_rows = (run_dir / "metrics.jsonl").read_text()

    resumed = subprocess.run(
        [str(CLI), str(leaf), "--resume-from", str(experiment)],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (second,) = (run for run in _runs(leaf) if run != run_dir)
    (done,) = _json(second / "summary.json")["trials"]
    assert done["status"] == "completed" and done["iterations"] == BUDGET
    # Tune restores its pickled copy of our callback: the resumed rows must land in the
    # resuming run's records, and the interrupted run's records stay as they were.
    assert (run_dir / "metrics.jsonl").read_text() == first_rows
    resumed_rows = [
        json.loads(line) for line in (second / "metrics.jsonl").read_text().splitlines()
    ]
    assert [row["training_iteration"] for row in resumed_rows] == list(
        range(trial["iterations"] + 1, BUDGET + 1)
    )
    # Tune's own per-trial log: the restored trial went on from the saved iteration.
    rows = [json.loads(line) for line in trial_result.read_text().splitlines()]
    assert [row["training_iteration"] for row in rows] == list(range(1, BUDGET + 1))

"""A run killed by SIGKILL (what the out-of-memory killer sends) reads `crashed` everywhere,
its record untouched until asked; it resumes from its last checkpoint. Real processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl_harness.analysis import RunArtifacts, run_checkpoints
from rl_harness.cli import main
from rl_harness.harness.liveness import check_status, process_identity
from rl_harness.harness.metrics import read_metrics

CLI = Path(sys.executable).parent / "rl-harness"
BUDGET = 6

# Slow enough to kill mid-training: a checkpoint every iteration, half a second per iteration.
CHECKPOINTED = """
import time
from ray.rllib.algorithms.ppo import PPOConfig
from rl_harness import run_algorithm

def run(context):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )
    result = run_algorithm(
        config, context, stop=6, checkpoint_every=1,
        on_iteration=lambda algo, result: time.sleep(0.5),
    )
    return {"iterations": result.iterations}
"""


def _wait_for_checkpoint_row(leaf: Path, proc: subprocess.Popen) -> Path:
    deadline = time.monotonic() + 240
    while True:
        runs = sorted((leaf.parent / "results").glob("*/checkpoints.jsonl"))
        if runs and runs[0].read_text().strip():
            return runs[0].parent
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            pytest.fail(f"no checkpoint (exit {proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}")
        time.sleep(0.1)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def test_sigkill_reads_crashed_everywhere_then_marks_and_resumes(tmp_path: Path, capsys):
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(CHECKPOINTED)
    proc = subprocess.Popen(
        [str(CLI), str(leaf), "--no-upload-artifacts"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    run_dir = _wait_for_checkpoint_row(leaf, proc)
    os.kill(proc.pid, signal.SIGKILL)  # the driver alone, as the OOM killer does
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    manifest_file = run_dir / "run_manifest.json"
    on_disk = manifest_file.read_text()
    recorded = json.loads(on_disk)
    assert recorded["status"] == "running"
    assert recorded["process"]["pid"] == proc.pid
    assert recorded["process"]["host"] == socket.gethostname()

    # runs, show, compare and RunArtifacts all say crashed; none rewrites the record
    code, out, _ = _cli(capsys, "runs", str(tmp_path))
    assert code == 0
    row = next(line.split() for line in out.splitlines() if line.startswith(run_dir.name))
    assert row[2] == "crashed"
    assert "--mark-crashed" in out
    code, out, _ = _cli(capsys, "show", str(run_dir))
    assert code == 0 and f"{run_dir.name}  [crashed]" in out
    assert f"status      crashed (the record says running): process {proc.pid}" in out
    code, out, _ = _cli(capsys, "show", str(run_dir), "--json")
    assert json.loads(out)["status"] == "crashed"
    code, _, err = _cli(capsys, "compare", str(tmp_path))
    assert code == 2 and "(1 runs found: 1 crashed)" in err
    run = RunArtifacts.open(run_dir)
    assert (run.status, run.recorded_status) == ("crashed", "running")
    assert f"process {proc.pid}" in run.status_note
    assert manifest_file.read_text() == on_disk

    # asked to, `runs --mark-crashed` records it
    code, out, _ = _cli(capsys, "runs", str(tmp_path), "--mark-crashed")
    assert code == 0 and f"marked 1 crashed run(s): {run_dir.name}" in out
    marked = json.loads(manifest_file.read_text())
    assert marked["status"] == "crashed" and marked["error"]["type"] == "Crashed"
    assert RunArtifacts.open(run_dir).status == "crashed"

    # the last checkpoint the killed run recorded resumes to the full budget
    last = run_checkpoints(run_dir)[-1]
    done = read_metrics(run_dir / "metrics.jsonl")
    assert 1 <= last.iteration <= len(done) < BUDGET
    assert last.env_steps == done[last.iteration - 1]["num_env_steps_sampled_lifetime"]
    resumed = subprocess.run(
        [str(CLI), str(leaf), "--resume-from", str(last.path), "--no-upload-artifacts"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    (second,) = (p for p in (leaf.parent / "results").iterdir() if p != run_dir)
    assert json.loads((second / "run_manifest.json").read_text())["status"] == "completed"
    rows = read_metrics(second / "metrics.jsonl")
    assert [r["training_iteration"] for r in rows] == list(range(last.iteration + 1, BUDGET + 1))


def _running(**process) -> dict:
    return {"status": "running", "process": {**process_identity(), **process}}


def test_status_rules_for_running_records():
    me = process_identity()
    assert check_status(_running()).status == "running"  # this very process: alive
    assert check_status({"status": "completed", "process": me}).status == "completed"
    # the pid is alive but started at another time: reused by another process
    reused = check_status(_running(start_ticks=me["start_ticks"] + 1))
    assert reused.status == "crashed" and "another process" in reused.note
    # another boot of this host: whatever ran then is gone
    rebooted = check_status(_running(boot_id="00000000-0000-0000-0000-000000000000"))
    assert rebooted.status == "crashed" and "rebooted" in rebooted.note
    # another host cannot be checked from here: running, with a note saying so
    elsewhere = check_status(_running(host="some-other-host"))
    assert elsewhere.status == "running" and elsewhere.unchecked
    assert "another host (some-other-host)" in elsewhere.note
    # an older record without a process section is left as running
    assert check_status({"status": "running"}).unchecked


def test_a_run_on_another_host_is_shown_as_unchecked(tmp_path: Path, capsys):
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text("def run(context):\n    return {}\n")
    assert main([str(leaf), "--run-id", "elsewhere", "--no-upload-artifacts"]) == 0
    path = leaf.parent / "results" / "elsewhere" / "run_manifest.json"
    record = json.loads(path.read_text())
    record["status"], record["process"]["host"] = "running", "gpu-box-7"
    path.write_text(json.dumps(record))
    code, out, _ = _cli(capsys, "runs", str(tmp_path))
    row = next(line.split() for line in out.splitlines() if line.startswith("elsewhere"))
    assert row[2] == "running?"
    assert "running? elsewhere: recorded as running; running on another host (gpu-box-7)" in out
    run = RunArtifacts.open(path.parent)
    assert run.status == "running" and "gpu-box-7" in run.status_note
    code, out, _ = _cli(capsys, "runs", str(tmp_path), "--mark-crashed")
    assert "marked 0 crashed run(s)" in out
    assert json.loads(path.read_text())["status"] == "running"

"""bench/gpu_flagship.sh, the prepared GPU run of the flagship, on the CPU: its dry-run (the
same script and recipe, smoke budget, cpu-local profile) trains 2 iterations through the
real CLI and records per iteration env steps/s, learner seconds and the GPU memory fields,
then prints the summary line."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


# About 2 minutes (a fresh process starts Ray and trains 2 iterations): over the fast
# suite's ~60 s guide.
@pytest.mark.slow
def test_gpu_flagship_dry_run_records_speed_learner_time_and_gpu_memory(tmp_path):
    out = tmp_path / "out"
    env = dict(
        os.environ,
        OUT=str(out),
        GPU_FLAGSHIP_DRY_RUN="1",
        GPU_FLAGSHIP_ITERATIONS="2",
        GPU_FLAGSHIP_TIMEOUT="560",
        RAY_USAGE_STATS_ENABLED="0",
    )
    done = subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_flagship.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=590,
    )
    log = (out / "run.log").read_text() if (out / "run.log").exists() else ""
    assert done.returncode == 0, done.stdout[-2000:] + log[-3000:]
    assert (out / "exit_code").read_text().strip() == "0"
    record = json.loads((out / "gpu_flagship.json").read_text())
    assert record["path"] == "kv-steps" and record["hardware"]["profile"] == "cpu-local"
    assert record["budget"]["train_batch"] == 512  # the smoke budget, not FULL's 32,768
    iterations = record["iterations"]
    assert [i["iteration"] for i in iterations] == [1, 2]
    assert [i["env_steps"] for i in iterations] == [512, 1024]
    assert all(i["env_steps_per_s"] > 0 for i in iterations)
    assert math.isnan(iterations[0]["learner_s"]) and 0 < iterations[1]["learner_s"] < 600
    assert all(i["torch"] == {"cuda": False} for i in iterations)  # no GPU here
    assert all("error" in i["nvidia_smi"][0] for i in iterations)
    summary = record["summary"]
    assert summary["steady_env_steps_per_s"] == iterations[1]["env_steps_per_s"]
    assert summary["steady_learner_s"] == iterations[1]["learner_s"]
    assert summary["gpu_max_memory_allocated_gib"] is None
    summary_lines = [
        line for line in done.stdout.splitlines() if line.startswith("[gpu_flagship] summary")
    ]
    assert summary_lines and json.loads(summary_lines[-1].split(" ", 2)[2]) == summary
    assert not (out / "artifacts").exists()  # checkpoints removed

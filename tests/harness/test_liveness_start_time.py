"""Liveness reads a process's start time from /proc/<pid>/stat (field 22). A real child
process started now: its start time is non-zero, later than this test process's, and (with
the boot time of /proc/stat) the wall-clock time it was started at. A record whose pid now
belongs to that child but whose start time is another process's reads `crashed`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl_harness.harness.liveness import check_status, process_identity, process_start_ticks

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")


@pytest.fixture
def child():
    before = time.time()
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process.started_between = (before, time.time())
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_child_process_start_time_is_its_own(child):
    parent = process_start_ticks(os.getpid())
    started = process_start_ticks(child.pid)
    assert parent and started  # field 22 is never 0 for a process started after boot
    assert started > parent  # the child started after this test process
    (boot,) = (line for line in Path("/proc/stat").read_text().splitlines() if "btime" in line)
    seconds = started / os.sysconf("SC_CLK_TCK") + int(boot.split()[1])
    before, after = child.started_between
    assert before - 1.5 < seconds < after + 1.5  # btime is whole seconds


def test_a_reused_pid_reads_crashed(child):
    # The record's process started when this test process did; its pid is the child's now.
    record = {"status": "running", "process": {**process_identity(), "pid": child.pid}}
    check = check_status(record)
    assert check.status == "crashed" and "another process" in check.note
    alive = {"status": "running", "process": process_identity(child.pid)}
    assert check_status(alive).status == "running"

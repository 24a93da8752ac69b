"""Is a `running` run still running? The manifest names its process; readers check it.

SIGKILL (the kernel's out-of-memory killer sends it) ends a run before it can write its final
record, so its manifest says `running` forever. The manifest therefore records the driver's
host, boot id, pid and process start time (`process`), and every reader reports `crashed`
for a `running` record whose process is gone: same host and boot, and the pid is missing or
now belongs to a process that started at another time; or the host has rebooted since. A
record from another host cannot be checked from here and stays `running`, with a note saying
so. Readers never rewrite the record; `mark_crashed` (`rl-harness runs --mark-crashed`) does.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_harness.harness.interrupts import CRASHED, RUNNING
from rl_harness.harness.manifest import read_manifest, write_manifest

BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This machine's boot id (Linux), which changes at every boot."""
    try:
        return BOOT_ID_FILE.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def process_start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22; fields[0] is field 3 (state)
    except (IndexError, ValueError):
        return None


def process_identity(pid: int | None = None) -> dict[str, Any]:
    """What the manifest records about the run's driver process."""
    pid = os.getpid() if pid is None else pid
    return {
        "host": socket.gethostname(),
        "boot_id": boot_id(),
        "pid": pid,
        "start_ticks": process_start_ticks(pid),
    }


def _pid_exists(pid: int) -> bool:
    if Path("/proc").is_dir():
        return Path(f"/proc/{pid}").exists()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


@dataclass(frozen=True)
class StatusCheck:
    """A record's status as readers report it."""

    status: str  # the record's status, or "crashed" for a running record whose process is gone
    recorded: str  # the status written in the manifest
    note: str | None = None  # why it is crashed, or why a running one could not be checked

    @property
    def unchecked(self) -> bool:
        """A `running` record that could not be checked from this machine."""
        return self.status == RUNNING and self.note is not None


def check_status(manifest: Mapping[str, Any]) -> StatusCheck:
    """The status to report for a manifest (see the module docstring); reads, never writes."""
    recorded = str(manifest.get("status") or "unknown")
    if recorded != RUNNING:
        return StatusCheck(recorded, recorded)
    process = manifest.get("process")
    if not isinstance(process, Mapping) or not isinstance(process.get("pid"), int):
        return StatusCheck(RUNNING, recorded, "no process recorded (an older run): not checked")
    host, pid = process.get("host"), int(process["pid"])
    if host != socket.gethostname():
        return StatusCheck(
            RUNNING, recorded, f"running on another host ({host}): not checkable from here"
        )
    recorded_boot, now_boot = process.get("boot_id"), boot_id()
    if recorded_boot and now_boot and recorded_boot != now_boot:
        return StatusCheck(CRASHED, recorded, f"{host} has rebooted since the run started")
    if not _pid_exists(pid):
        return StatusCheck(CRASHED, recorded, f"process {pid} on {host} is gone")
    started = process.get("start_ticks")
    if started is not None and process_start_ticks(pid) not in (None, started):
        return StatusCheck(
            CRASHED, recorded, f"process {pid} on {host} is gone (the pid is another process now)"
        )
    return StatusCheck(RUNNING, recorded)


def mark_crashed(results_dir: Path) -> bool:
    """Record `crashed` in the manifest of a run whose check says so; True if it changed."""
    manifest = read_manifest(results_dir)
    check = check_status(manifest)
    if check.status != CRASHED or check.recorded != RUNNING:
        return False
    manifest["status"] = CRASHED
    manifest["error"] = {"type": "Crashed", "message": check.note}
    manifest["marked_crashed_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    write_manifest(results_dir, manifest)
    return True

"""The local record of rented instances: one JSON file, every change under a file lock.

Holds no secrets (no API key, no forwarded values): ids, prices, commits, deadlines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from filelock import FileLock

from rl_harness.harness.atomic import read_json, write_json_atomic

STATE_DIR_ENV = "RLH_VAST_STATE_DIR"
ACTIVE = "active"
DESTROYED = "destroyed"
GONE = "gone"  # no longer listed by vast: it destroyed itself (or was destroyed elsewhere)


def default_state_dir() -> Path:
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or "~/.local/state"
    return Path(base).expanduser() / "rl-harness" / "vast"


@dataclass
class InstanceRecord:
    instance_id: int
    launch_id: str
    label: str
    offer_id: int
    machine_id: int
    gpu_name: str
    num_gpus: int
    dph: float
    seed: int | None
    command: str
    created_at: float  # our clock: when the create call returned (billing starts there)
    deadline_at: float  # our clock's estimate; the box's own deadline runs from its start
    experiment_commit: str
    library_commit: str
    results_branch: str
    status: str = ACTIVE
    ended_at: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    max_hours: float | None = None  # the box's watchdog destroys it this long after start
    started_at: float | None = None  # vast's `start_date` of the instance, once reported

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InstanceRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def hours_so_far(self, now: float | None = None) -> float:
        end = self.ended_at if self.ended_at is not None else (now or time.time())
        return max(0.0, end - self.created_at) / 3600.0

    @property
    def run_hours(self) -> float:
        if self.max_hours is not None:
            return float(self.max_hours)
        return max(0.0, self.deadline_at - self.created_at) / 3600.0  # records before max_hours

    def box_deadline(self, live: dict[str, Any] | None = None) -> float | None:
        """When the box's own watchdog destroys it: vast's start time of the instance plus
        `max_hours`. None while vast reports no start (the box has not booted, so its
        watchdog has not started either); our creation clock is never used for this."""
        start = (live or {}).get("start_date") or self.started_at
        if not start:
            return None
        return float(start) + self.run_hours * 3600.0

    def overdue(self, live: dict[str, Any] | None, now: float, grace_s: float) -> bool:
        """Still listed by vast past the box's own deadline plus `grace_s`."""
        deadline = self.box_deadline(live)
        return self.status == ACTIVE and deadline is not None and now > deadline + grace_s


class StateFile:
    """`instances.json` in the state dir; readers and writers take `instances.json.lock`."""

    def __init__(self, state_dir: Path | None = None, *, lock_timeout_s: float = 60.0):
        self.dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.path = self.dir / "instances.json"
        self._lock = FileLock(str(self.path) + ".lock", timeout=lock_timeout_s)

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Hold the lock over read-modify-write; the file is replaced atomically on exit."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            data = self._read()
            yield data
            write_json_atomic(self.path, data)

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"version": 1, "instances": {}}
        data = read_json(self.path)
        if not isinstance(data, dict) or not isinstance(data.get("instances"), dict):
            raise ValueError(f"{self.path} is not an rl-harness vast state file")
        return data

    def add(self, record: InstanceRecord) -> None:
        with self._locked() as data:
            data["instances"][str(record.instance_id)] = asdict(record)

    def update(self, instance_id: int, **changes: object) -> InstanceRecord | None:
        """Change fields of one record; None when the id is not recorded."""
        with self._locked() as data:
            raw = data["instances"].get(str(instance_id))
            if raw is None:
                return None
            raw.update(changes)
            return InstanceRecord.from_dict(raw)

    def mark_ended(self, instance_id: int, status: str, note: str = "") -> None:
        self.update(instance_id, status=status, ended_at=time.time(), note=note)

    def records(
        self, where: Callable[[InstanceRecord], bool] | None = None
    ) -> list[InstanceRecord]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            data = self._read()
        out = [InstanceRecord.from_dict(raw) for raw in data["instances"].values()]
        out.sort(key=lambda r: (r.created_at, r.instance_id))
        return [r for r in out if where is None or where(r)]

    def active(self) -> list[InstanceRecord]:
        return self.records(lambda r: r.status == ACTIVE)

"""When runners save checkpoints, and the record of each one (results/<run-id>/checkpoints.jsonl).

    CheckpointSchedule(at_start=True, every=10, log_base=2.0, log_unit="env_steps", log_first=4096)

saves one checkpoint before any training (step 0), one every 10 iterations, and one at the
first iteration whose lifetime env steps reach 4096, 8192, 16384, ... (log-spaced: the
thresholds `log_first * log_base**k`; by iterations with `log_unit="iterations"`). Any mix
of the three works; both runners take one (`checkpoint_schedule=`), and a final checkpoint
is always saved at the end as before.

Every saved checkpoint gets a row in checkpoints.jsonl: iteration, lifetime env steps, the
path relative to artifacts/<run-id>/ (a URI when Tune stored it on a bucket), why it was saved
(`start`, `every`, `log`, `final`; Tune rows say `tune` for its own), and for Tune the trial
id and seed. `rl_harness.analysis.run_checkpoints(run)` reads them back, oldest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rl_harness.harness.atomic import append_json_line
from rl_harness.harness.layout import RunPaths
from rl_harness.harness.metric_keys import ENV_STEPS_KEY

LogUnit = Literal["iterations", "env_steps"]


def crossed_log_threshold(before: float, now: float, *, base: float, first: float) -> bool:
    """True when some threshold `first * base**k` (k >= 0) lies in (before, now]."""
    threshold = float(first)
    while threshold <= before:
        threshold *= base
    return threshold <= now


@dataclass(frozen=True)
class CheckpointSchedule:
    """When to save checkpoints besides the final one (see the module docstring)."""

    at_start: bool = False  # step 0: before the first training iteration (not on resume)
    every: int = 0  # every N iterations (0: off)
    log_base: float | None = None  # log-spaced thresholds log_first * log_base**k (None: off)
    log_first: float = 1.0  # the first threshold, in log_unit
    log_unit: LogUnit = "iterations"

    def __post_init__(self) -> None:
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 0:
            raise ValueError(f"every must be an integer >= 0, got {self.every!r}")
        if self.log_base is not None and not self.log_base > 1:
            raise ValueError(f"log_base must be > 1, got {self.log_base!r}")
        if not self.log_first > 0:
            raise ValueError(f"log_first must be > 0, got {self.log_first!r}")
        if self.log_unit not in ("iterations", "env_steps"):
            raise ValueError(f"log_unit must be 'iterations' or 'env_steps', got {self.log_unit!r}")

    def reasons(
        self,
        iteration: int,
        env_steps: float | None,
        *,
        previous_iteration: int,
        previous_env_steps: float | None,
    ) -> list[str]:
        """Why the iteration that just ended (from the previous counts) is due a checkpoint."""
        reasons = []
        if self.every and iteration % self.every == 0:
            reasons.append("every")
        if self.log_base is not None:
            if self.log_unit == "iterations":
                before, now = float(previous_iteration), float(iteration)
            else:
                before, now = float(previous_env_steps or 0), float(env_steps or 0)
            if crossed_log_threshold(before, now, base=self.log_base, first=self.log_first):
                reasons.append("log")
        return reasons


def as_schedule(checkpoint_every: int, schedule: CheckpointSchedule | None) -> CheckpointSchedule:
    """The runners' `checkpoint_every=k` is `CheckpointSchedule(every=k)`; not both."""
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int):
        raise ValueError(f"checkpoint_every must be an integer >= 0, got {checkpoint_every!r}")
    if checkpoint_every < 0:
        raise ValueError(f"checkpoint_every must be >= 0, got {checkpoint_every}")
    if schedule is None:
        return CheckpointSchedule(every=checkpoint_every)
    if checkpoint_every:
        raise ValueError("pass checkpoint_every or checkpoint_schedule, not both")
    return schedule


def env_steps_of(row: Mapping[str, Any]) -> int | None:
    steps = row.get(ENV_STEPS_KEY)
    return int(steps) if isinstance(steps, int | float) else None


class CheckpointLog:
    """Appends rows to results/<run-id>/checkpoints.jsonl."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths

    def append(
        self,
        path: str | Path,
        *,
        iteration: int,
        env_steps: int | None,
        reasons: list[str],
        trial_id: str | None = None,
        seed: int | None = None,
    ) -> None:
        row: dict[str, Any] = {
            "iteration": int(iteration),
            "env_steps": env_steps,
            "path": self.paths.record(path),
            "reasons": list(reasons),
        }
        if trial_id is not None:
            row.update(trial_id=trial_id, seed=seed)
        append_json_line(self.paths.checkpoint_log, row)

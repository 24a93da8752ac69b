"""The compact scalar subset of RLlib results that goes into results/<run-id>/metrics.jsonl."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Number
from pathlib import Path
from typing import Any

from rl_harness.harness.metric_keys import (
    ALL_MODULES,
    ENV_RUNNER_STATS,
    ENV_RUNNERS,
    ENV_STEPS_KEY,
    ITERATION_KEY,
    ITERATION_TIME_KEY,
    LEARNERS,
    RETURN_KEY,
    TOTAL_LOSS,
    TOTAL_TIME_KEY,
)

_TOP_LEVEL = (ITERATION_KEY, ENV_STEPS_KEY, ITERATION_TIME_KEY, TOTAL_TIME_KEY)
# Bookkeeping and internals of RLlib: noise in a compact record.
_NOISE = (
    "timer",
    "throughput",
    "connector",
    "lifetime",
    "weights_seq_no",
    "num_module_steps",
    "num_agent_steps",
    "num_trainable_parameters",
    "num_non_trainable_parameters",
    "diff_num_grad_updates",
    "module_train_batch_size",
    "sum_episodes_length",
)
_TIMING = ("time", "timer", "throughput", "duration", "timestamp")


def flatten(result: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "/"))
        else:
            flat[name] = value
    return flat


def _scalar(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    # Tested as a flag: narrowed to the abstract Number, `value` would not pass to int()/float().
    is_number = isinstance(value, Number)
    if is_number:
        if isinstance(value, int) or (hasattr(value, "dtype") and value.dtype.kind in "iu"):
            return int(value)
        number = float(value)
        return number if math.isfinite(number) else None
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # 0-d numpy/torch
        return _scalar(value.item())
    return None


def _keep(key: str) -> bool:
    if key in _TOP_LEVEL:
        return True
    parts = key.split("/")
    if parts[0] == ENV_RUNNERS:
        if len(parts) == 2:
            return parts[1] in ENV_RUNNER_STATS
        # Namespaced custom metrics (e.g. env_runners/belief/bayes_gap).
        return (
            not any(noise in key for noise in _NOISE)
            and "agent_" not in parts[1]
            and ("module_" not in parts[1])
        )
    if parts[0] == LEARNERS and len(parts) >= 3 and parts[1] != ALL_MODULES:
        return not any(noise in key for noise in _NOISE)
    return False


def compact_metrics(result: Mapping[str, Any]) -> dict[str, int | float | None]:
    """Scalars worth keeping per iteration: returns, lengths, losses, aux metrics, timings."""
    row: dict[str, int | float | None] = {}
    for key, value in flatten(result).items():
        if not _keep(key):
            continue
        scalar = _scalar(value)
        if scalar is not None or isinstance(value, float):
            row[key] = scalar
    return row


def is_timing_key(key: str) -> bool:
    """Keys that differ between identical runs (wall-clock), excluded from determinism checks."""
    return any(word in key for word in _TIMING)


def without_timings(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not is_timing_key(k)}


class MetricsLog:
    """Append-only JSON-lines file, flushed and fsynced per row so a crash loses nothing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, row: Mapping[str, Any]) -> None:
        line = json.dumps(dict(row), sort_keys=True, allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """Rows of a metrics.jsonl; a torn last line (crash mid-write) is skipped (readers that
    name what they skip use `scan_metrics`)."""
    return scan_metrics(path).rows


@dataclass(frozen=True)
class MetricsScan:
    """A metrics.jsonl as read: the rows, and the 1-based line numbers that were not rows
    (not JSON, or not a JSON object); `torn_last`: the last of them is the file's last
    line, without its newline (a crash mid-write)."""

    rows: list[dict[str, Any]]
    skipped: list[int]
    torn_last: bool

    def problem(self, path: Path) -> str | None:
        """One line naming the file, the rows skipped and the final iteration read; None
        when every line was a row."""
        if not self.skipped:
            return None
        last = self.rows[-1].get(ITERATION_KEY) if self.rows else None
        final = f"final iteration read as {last}" if last is not None else "no row read"
        if self.torn_last and len(self.skipped) == 1:
            return f"{path} row {self.skipped[0]} truncated; {final}"
        listed = ", ".join(map(str, self.skipped[:5])) + (", ..." if len(self.skipped) > 5 else "")
        what = "row" if len(self.skipped) == 1 else f"{len(self.skipped)} rows"
        return f"{path} {what} {listed} not readable (skipped); {final}"


def scan_metrics(path: Path) -> MetricsScan:
    """Read a metrics.jsonl keeping count of the lines that are not rows (blank lines hold
    nothing and are passed over)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    rows: list[dict[str, Any]] = []
    skipped: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            skipped.append(number)
    torn = bool(skipped) and skipped[-1] == len(lines) and not text.endswith("\n")
    return MetricsScan(rows, skipped, torn)


def progress_parts(row: Mapping[str, Any], target: int | None = None) -> list[str]:
    """The pieces of a progress line: iteration, env steps, return, loss, iteration time."""
    iteration = row.get(ITERATION_KEY, "?")
    parts = [f"iter {iteration}" + (f"/{target}" if target else "")]
    steps = row.get(ENV_STEPS_KEY)
    if steps is not None:
        parts.append(f"steps {int(steps):,}")
    ret = row.get(RETURN_KEY)
    if ret is not None:
        parts.append(f"return {ret:.4g}")
    losses = [(k, v) for k, v in row.items() if k.endswith(f"/{TOTAL_LOSS}") and v is not None]
    if losses:
        parts.append(f"loss {losses[0][1]:.4g}")
    seconds = row.get(ITERATION_TIME_KEY)
    if seconds is not None:
        parts.append(f"{seconds:.1f}s")
    return parts

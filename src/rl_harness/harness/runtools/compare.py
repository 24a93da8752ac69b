"""Compare two metrics.jsonl logs: identical, within tolerance, or different.

Timing keys (metrics.without_timings) are dropped first: wall-clock never repeats. Tune's
`trial_id` is random per run, so it is dropped too, and rows are ordered by (seed, iteration)
because concurrent trials append in whatever order they finish.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rl_harness.harness.metric_keys import ITERATION_KEY
from rl_harness.harness.metrics import without_timings

Verdict = Literal["identical", "within tolerance", "different"]
IGNORED_KEYS = ("trial_id",)
MAX_LISTED = 10


@dataclass(frozen=True)
class MetricsComparison:
    verdict: Verdict
    rows_a: int
    rows_b: int
    compared_values: int
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0
    differences: list[str] = field(default_factory=list)  # the first MAX_LISTED, readable


def comparable_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cleaned = [
        {k: v for k, v in without_timings(row).items() if k not in IGNORED_KEYS} for row in rows
    ]
    if any("trial_id" in row for row in rows):
        cleaned.sort(key=lambda r: (str(r.get("seed")), r.get(ITERATION_KEY) or 0))
    return cleaned


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def compare_metrics(
    recorded: Sequence[Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
    *,
    rtol: float = 1e-6,
    atol: float = 0.0,
) -> MetricsComparison:
    """Row by row, key by key; numbers pass the tolerance test of math.isclose(rtol, atol)."""
    a, b = comparable_rows(recorded), comparable_rows(new)
    compared = sum(len(row) for row in a)
    if a == b:
        return MetricsComparison("identical", len(a), len(b), compared)
    problems: list[str] = []
    if len(a) != len(b):
        problems.append(f"recorded {len(a)} rows, new run {len(b)} rows")
    max_abs = max_rel = 0.0
    within = len(a) == len(b)
    for index, (row_a, row_b) in enumerate(zip(a, b, strict=False)):
        for key in sorted(set(row_a) | set(row_b)):
            if key not in row_a or key not in row_b:
                within = False
                side = "new run" if key not in row_b else "record"
                problems.append(f"row {index + 1}: {key} missing in the {side}")
                continue
            x, y = row_a[key], row_b[key]
            if x == y:
                continue
            if _is_number(x) and _is_number(y) and math.isfinite(x) and math.isfinite(y):
                gap = abs(x - y)
                relative = gap / max(abs(x), abs(y))
                max_abs, max_rel = max(max_abs, gap), max(max_rel, relative)
                if math.isclose(x, y, rel_tol=rtol, abs_tol=atol):
                    continue
            within = False
            problems.append(f"row {index + 1}: {key} recorded {x!r}, new {y!r}")
    verdict: Verdict = "within tolerance" if within else "different"
    return MetricsComparison(
        verdict, len(a), len(b), compared, max_abs, max_rel, problems[:MAX_LISTED]
    )

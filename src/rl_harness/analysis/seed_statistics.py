"""Tests across training seeds, as a reviewer reads them: the seed is the unit.

- `seed_test(values)`: mean, Student-t interval and the two-sided one-sample t-test of the
  per-seed values against 0 (for paired differences, pass agent - control per seed).
- Holm's correction of one family of tests is `rl_harness.analysis.holm_adjust`
  (probes/multiple.py); report the adjusted p beside the raw one.
- `seeds_for_power(sd, effect)`: seeds a one-sample two-sided t-test needs to detect a
  stated smallest effect of interest with the given power, at a per-seed spread `sd`. The
  effect is the caller's stated choice, never the observed mean (a power figure at the
  observed effect says nothing the p-value did not).

Pure NumPy/SciPy; SciPy loads on first use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


@dataclass(frozen=True)
class SeedTest:
    n: int  # seeds with a value
    mean: float
    low: float | None  # Student-t interval of the mean (None for one seed)
    high: float | None
    sd: float | None  # sample standard deviation (ddof 1; None for one seed)
    p_value: float | None  # two-sided one-sample t-test of mean 0 (None for one seed)


def seed_test(values: Sequence[float], confidence: float = CONFIDENCE) -> SeedTest:
    """Mean, interval and two-sided t-test against 0 of the per-seed `values`."""
    data = [float(v) for v in values]
    if not data:
        raise ValueError("seed_test needs at least one value")
    if any(not math.isfinite(v) for v in data):
        raise ValueError(f"seed_test got a non-finite value: {data}")
    n = len(data)
    mean = math.fsum(data) / n
    if n == 1:
        return SeedTest(1, mean, None, None, None, None)
    from scipy import stats

    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / (n - 1))
    if sd == 0.0:  # equal values: the interval is a point, and a nonzero mean is certain
        return SeedTest(n, mean, mean, mean, 0.0, 1.0 if mean == 0.0 else 0.0)
    sem = sd / math.sqrt(n)
    low, high = stats.t.interval(confidence, n - 1, loc=mean, scale=sem)
    p_value = float(2.0 * stats.t.sf(abs(mean / sem), n - 1))
    return SeedTest(n, mean, float(low), float(high), sd, p_value)


def t_test_power(n: int, sd: float, effect: float, alpha: float = 0.05) -> float:
    """Power of the two-sided one-sample t-test with n seeds at true mean `effect`."""
    if n < 2:
        return 0.0
    from scipy import stats

    df = n - 1
    critical = stats.t.ppf(1.0 - alpha / 2.0, df)
    shift = abs(effect) / (sd / math.sqrt(n))
    return float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))


def seeds_for_power(
    sd: float, effect: float, *, power: float = 0.8, alpha: float = 0.05, max_seeds: int = 10_000
) -> int | None:
    """The fewest seeds (>= 2) whose one-sample t-test reaches `power` for a true mean of
    `effect` at per-seed spread `sd`; None when even `max_seeds` do not."""
    if sd < 0 or effect == 0:
        raise ValueError(f"seeds_for_power needs sd >= 0 and a nonzero effect, got {sd}, {effect}")
    if sd == 0:
        return 2
    for n in range(2, max_seeds + 1):
        if t_test_power(n, sd, effect, alpha) >= power:
            return n
    return None

"""Bootstrap over episodes: resample whole episodes with replacement (steps within an
episode are correlated, so resampling steps would make intervals too narrow)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a bootstrap percentile interval."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def bootstrap_weights(n_episodes: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_resamples, n_episodes) counts: how often each episode appears in each resample."""
    if n_episodes < 1 or n_resamples < 1:
        raise ValueError(
            f"need at least one episode and one resample, got {n_episodes} and {n_resamples}"
        )
    return rng.multinomial(n_episodes, np.full(n_episodes, 1.0 / n_episodes), size=n_resamples)


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper percentiles over the first axis (NaN resamples are ignored)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    tail = (1.0 - confidence) / 2.0
    low, high = np.nanquantile(np.asarray(samples, dtype=np.float64), [tail, 1 - tail], axis=0)
    return low, high


def estimates(values: np.ndarray, samples: np.ndarray, confidence: float) -> list[Estimate]:
    """One Estimate per entry of `values` (k,), from bootstrap `samples` (n_resamples, k)."""
    low, high = percentile_interval(samples, confidence)
    return [
        Estimate(float(v), float(lo), float(hi))
        for v, lo, hi in zip(
            np.atleast_1d(values), np.atleast_1d(low), np.atleast_1d(high), strict=True
        )
    ]

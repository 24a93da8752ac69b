"""Scores of a policy's action shift against the optimal one, from per-episode sums, so a
bootstrap over episodes is one matrix product (`probes.bootstrap`).

With p the policy's action shift and o the optimal one, (E, T, A) each, pooled over steps
and action coordinates:

- correlation: Pearson, each coordinate centred on its own mean (None when the policy does
  not move: its shift at most SHIFT_TOL times the optimal one);
- cosine: sum(p . o) / sqrt(sum |p|^2 sum |o|^2);
- fraction: sum(p . o) / sum |o|^2, the projection of the policy's shift on the optimal
  one as a fraction of its length (1: the full optimal shift; 0: none of it);
- policy_shift_rms, optimal_shift_rms: sqrt(mean over steps of |p|^2), sqrt(... |o|^2).

Pure NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rl_harness.analysis.probes.bootstrap import Estimate, estimates

SHIFT_TOL = 1e-9  # a policy shift at most this fraction of the optimal one does not move
STATISTICS = ("correlation", "cosine", "fraction", "policy_shift_rms", "optimal_shift_rms")


def shift_sums(policy_shift: np.ndarray, optimal_shift: np.ndarray) -> np.ndarray:
    """Per-episode sums (E, 6, A) of (E, T, A) shifts p and o: count, sum p, sum o,
    sum p^2, sum o^2, sum p o (per action coordinate)."""
    p = np.asarray(policy_shift, dtype=np.float64)
    o = np.asarray(optimal_shift, dtype=np.float64)
    if p.ndim != 3 or p.shape != o.shape or min(p.shape) == 0:
        raise ValueError(
            f"policy and optimal shifts must both be non-empty (E, T, A), got {p.shape} and "
            f"{o.shape}"
        )
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(o))):
        raise ValueError("the shifts hold NaN or infinite values")
    count = np.full((p.shape[0], p.shape[2]), float(p.shape[1]))
    parts = (count, p.sum(1), o.sum(1), (p * p).sum(1), (o * o).sum(1), (p * o).sum(1))
    return np.stack(parts, axis=1)


def shift_statistics(sums: np.ndarray) -> dict[str, np.ndarray]:
    """The STATISTICS of summed (..., 6, A) shift sums (NaN where undefined)."""
    n, sp, so, spp, soo, spo = np.moveaxis(np.asarray(sums, dtype=np.float64), -2, 0)
    steps = n[..., 0]
    cov = (spo - sp * so / n).sum(-1)
    var_p = np.maximum(spp - sp**2 / n, 0.0).sum(-1)
    var_o = np.maximum(soo - so**2 / n, 0.0).sum(-1)
    p2, o2, po = spp.sum(-1), soo.sum(-1), spo.sum(-1)
    moves = p2 > SHIFT_TOL**2 * o2
    with np.errstate(divide="ignore", invalid="ignore"):
        correlation = np.where(
            moves & (var_p > 0) & (var_o > 0), cov / np.sqrt(var_p * var_o), np.nan
        )
        cosine = np.where(moves & (o2 > 0), po / np.sqrt(p2 * o2), np.nan)
        fraction = np.where(o2 > 0, po / o2, np.nan)
    return {
        "correlation": correlation,
        "cosine": cosine,
        "fraction": fraction,
        "policy_shift_rms": np.sqrt(p2 / steps),
        "optimal_shift_rms": np.sqrt(o2 / steps),
    }


def _estimate(point: np.ndarray, samples: np.ndarray, confidence: float) -> Estimate | None:
    if not np.isfinite(point):
        return None
    return estimates(np.asarray([point]), np.asarray(samples)[:, None], confidence)[0]


@dataclass(frozen=True)
class ShiftScores:
    """The policy's action shift against the optimal one (see the module docstring), with
    percentile intervals over episode resamples; None where undefined (`undefined` says
    why)."""

    correlation: Estimate | None
    cosine: Estimate | None
    fraction: Estimate | None
    policy_shift_rms: Estimate | None
    optimal_shift_rms: Estimate | None
    n_episodes: int
    n_steps: int
    undefined: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = value.to_dict() if isinstance(value, Estimate) else value
        return out


def shift_scores(
    policy_shift: np.ndarray,
    optimal_shift: np.ndarray,
    *,
    weights: np.ndarray,
    confidence: float = 0.95,
) -> ShiftScores:
    """Scores of (E, T, A) shifts with intervals over the episode resamples `weights`
    (R, E) (`bootstrap_weights`)."""
    sums = shift_sums(policy_shift, optimal_shift)
    counts = _weights(weights, sums.shape[0])
    point = shift_statistics(sums.sum(0))
    samples = shift_statistics(np.einsum("re,eka->rka", counts, sums))
    undefined = {}
    if not np.isfinite(point["fraction"]):
        undefined["fraction"] = "the optimal policy does not move"
    if not np.isfinite(point["correlation"]):
        undefined["correlation"] = (
            "the policy (or the optimal policy) does not move: its shift is at most "
            f"{SHIFT_TOL:g} of the optimal one, or constant"
        )
    if not np.isfinite(point["cosine"]):
        undefined["cosine"] = "the policy (or the optimal policy) does not move"
    return ShiftScores(
        **{key: _estimate(point[key], samples[key], confidence) for key in STATISTICS},
        n_episodes=int(sums.shape[0]),
        n_steps=int(sums[:, 0, 0].sum()),
        undefined=undefined,
    )


def shift_difference(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    *,
    weights: np.ndarray,
    confidence: float = 0.95,
) -> dict[str, Estimate | None]:
    """A - B of each statistic for two (policy shift, optimal shift) pairs on the same
    episodes, each resample scoring both (paired: the interval is of the difference)."""
    sums_a, sums_b = shift_sums(*a), shift_sums(*b)
    if sums_a.shape[0] != sums_b.shape[0]:
        raise ValueError(f"{sums_a.shape[0]} and {sums_b.shape[0]} episodes: not paired")
    counts = _weights(weights, sums_a.shape[0])
    point_a, point_b = shift_statistics(sums_a.sum(0)), shift_statistics(sums_b.sum(0))
    samples_a = shift_statistics(np.einsum("re,eka->rka", counts, sums_a))
    samples_b = shift_statistics(np.einsum("re,eka->rka", counts, sums_b))
    return {
        key: _estimate(point_a[key] - point_b[key], samples_a[key] - samples_b[key], confidence)
        for key in STATISTICS
    }


def _weights(weights: np.ndarray, episodes: int) -> np.ndarray:
    counts = np.asarray(weights, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != episodes:
        raise ValueError(f"weights must be (n_resamples, {episodes}), got {counts.shape}")
    return counts

"""Held-out R² of any predictions, and paired episode-bootstrap differences between two.

Two predictors of the same held-out targets (an agent's probe and a control's, or the
agent's probe and a window baseline) are compared on the *same* resampled episodes: each
bootstrap resample (one row of episode counts) scores both, and the interval is of the
difference. Steps of one episode are correlated, and so are the two predictors' errors on
one episode; resampling them together keeps both correlations, so the interval is far
tighter than two independent intervals would suggest, and exactly [0, 0] when the two
predictions are the same.

Scores: the global pooled R² (1 - SSE / SST over all held-out steps, targets pooled) and the
within-branch pooled R² of each named branching (see `branches.py`). Inputs are held-out
arrays only: targets and predictions (E_test, T, k), branch labels (E_test, T), and
bootstrap counts (R, E_test) (`bootstrap_weights`; pass the ones `evaluate_probe` drew, from
its stream `(*stream, "bootstrap")`, to pair with its intervals).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_harness.analysis.probes.bootstrap import Estimate, estimates
from rl_harness.analysis.probes.branches import branch_sums, within_scores
from rl_harness.analysis.probes.scores import episode_sums, scores


@dataclass(frozen=True)
class HeldOutScores:
    """Pooled R² (global and within each branching) with bootstrap intervals; None where
    undefined (targets that do not vary). For a paired difference, every value is A - B."""

    r2_pooled: Estimate | None
    within_branch: dict[str, Estimate | None]
    n_bootstrap: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        def one(value: Estimate | None) -> dict[str, float] | None:
            return None if value is None else value.to_dict()

        return {
            "r2_pooled": one(self.r2_pooled),
            "within_branch": {name: one(value) for name, value in self.within_branch.items()},
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
        }


def _held_out(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 3 or min(array.shape) == 0:
        raise ValueError(
            f"{name} must be a non-empty (n_test_episodes, T, k) array, got {array.shape}"
        )
    return array


def _checked(
    targets: np.ndarray,
    predictions: list[np.ndarray],
    branchings: Mapping[str, np.ndarray],
    weights: np.ndarray,
) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    y = _held_out("targets", targets)
    preds = [_held_out("predictions", p) for p in predictions]
    for pred in preds:
        if pred.shape != y.shape:
            raise ValueError(f"predictions {pred.shape} differ from targets {y.shape}")
    for name, labels in branchings.items():
        if np.shape(labels) != y.shape[:2]:
            raise ValueError(f"branching {name!r} covers {np.shape(labels)}, targets {y.shape[:2]}")
    counts = np.asarray(weights, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != y.shape[0]:
        raise ValueError(
            f"weights must be (n_resamples, n_test_episodes = {y.shape[0]}), got {counts.shape}"
        )
    return y, preds, counts


def _r2_samples(
    y: np.ndarray,
    pred: np.ndarray,
    branchings: Mapping[str, np.ndarray],
    counts: np.ndarray,
    include: np.ndarray | None,
) -> dict[str | None, tuple[float, np.ndarray]]:
    """{None: global, name: within} -> (point, (R,) resamples) of the pooled R²."""
    reference = y.reshape(-1, y.shape[2]).mean(axis=0)
    sums = episode_sums(y, pred, reference)
    out: dict[str | None, tuple[float, np.ndarray]] = {
        None: (
            float(scores(sums.total(), include).r2_pooled),
            scores(sums.weighted(counts), include).r2_pooled,
        )
    }
    for name, labels in branchings.items():
        per_branch = branch_sums(y, pred, labels)
        out[name] = (
            float(within_scores(per_branch.total(), include).r2_pooled[0]),
            within_scores(per_branch.weighted(counts), include).r2_pooled,
        )
    return out


def _estimate(point: float, samples: np.ndarray, confidence: float) -> Estimate | None:
    if not np.isfinite(point):
        return None
    return estimates(np.asarray([point]), samples[:, None], confidence)[0]


def r2_samples(
    targets: np.ndarray,
    predictions: np.ndarray,
    *,
    weights: np.ndarray,
    branchings: Mapping[str, np.ndarray] | None = None,
    include: np.ndarray | None = None,
) -> dict[str | None, tuple[float, np.ndarray]]:
    """{None: global, name: within `name`} -> (point, (R,) resampled) pooled R² of held-out
    `predictions` under the resamples `weights` (R, E_test): what `held_out_scores` and
    `paired_difference` summarize, for callers that derive several paired quantities (or a
    one-sided bootstrap p-value) from the same resamples."""
    branchings = dict(branchings or {})
    y, (pred,), counts = _checked(targets, [predictions], branchings, weights)
    return _r2_samples(y, pred, branchings, counts, include)


def held_out_scores(
    targets: np.ndarray,
    predictions: np.ndarray,
    *,
    weights: np.ndarray,
    branchings: Mapping[str, np.ndarray] | None = None,
    confidence: float = 0.95,
    include: np.ndarray | None = None,
) -> HeldOutScores:
    """Pooled R² of held-out `predictions`, globally and within each branching, with
    percentile intervals over the resamples `weights` (R, E_test)."""
    branchings = dict(branchings or {})
    y, (pred,), counts = _checked(targets, [predictions], branchings, weights)
    samples = _r2_samples(y, pred, branchings, counts, include)
    return HeldOutScores(
        r2_pooled=_estimate(*samples[None], confidence),
        within_branch={name: _estimate(*samples[name], confidence) for name in branchings},
        n_bootstrap=int(counts.shape[0]),
        confidence=float(confidence),
    )


def paired_difference(
    targets: np.ndarray,
    predictions_a: np.ndarray,
    predictions_b: np.ndarray,
    *,
    weights: np.ndarray,
    branchings: Mapping[str, np.ndarray] | None = None,
    confidence: float = 0.95,
    include: np.ndarray | None = None,
) -> HeldOutScores:
    """R²(A) - R²(B) on the same held-out steps, globally and within each branching; each
    bootstrap resample scores both predictors on the same resampled episodes."""
    branchings = dict(branchings or {})
    y, (pred_a, pred_b), counts = _checked(
        targets, [predictions_a, predictions_b], branchings, weights
    )
    a = _r2_samples(y, pred_a, branchings, counts, include)
    b = _r2_samples(y, pred_b, branchings, counts, include)

    def difference(key: str | None) -> Estimate | None:
        return _estimate(a[key][0] - b[key][0], a[key][1] - b[key][1], confidence)

    return HeldOutScores(
        r2_pooled=difference(None),
        within_branch={name: difference(name) for name in branchings},
        n_bootstrap=int(counts.shape[0]),
        confidence=float(confidence),
    )

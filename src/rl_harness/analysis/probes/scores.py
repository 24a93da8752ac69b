"""Regression scores from per-episode sums, so bootstrap resamples are one matrix product.

Each episode contributes a count, the probe's squared error per target, and the sums of
the targets centred on a reference (the train mean). From summed (or resample-weighted)
episode statistics follow, per target and pooled over targets:

- mse: the probe's mean squared error;
- mse_train_mean: the baseline that predicts the reference (train mean) everywhere;
- mse_best_constant: the best any constant can do on these data (their own mean), i.e.
  the targets' variance;
- r2 = 1 - mse / mse_best_constant (per target), pooled = 1 - sum sse / sum sst (targets
  weighted by their variance); rmse = sqrt(mse).

A target with zero variance has an undefined R² (NaN). `include` restricts the pooled scores
to some targets (evaluate_probe leaves out targets that never vary, and says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EpisodeSums:
    """Sufficient statistics; the leading axes index episodes (or resamples)."""

    count: np.ndarray  # (...,)
    squared_error: np.ndarray  # (..., k) sum of (target - prediction)^2
    centered_sum: np.ndarray  # (..., k) sum of (target - reference)
    centered_square: np.ndarray  # (..., k) sum of (target - reference)^2

    def weighted(self, weights: np.ndarray) -> EpisodeSums:
        """Sums over episodes under (..., n_episodes) weights (bootstrap counts, or ones)."""
        return EpisodeSums(
            count=weights @ self.count,
            squared_error=weights @ self.squared_error,
            centered_sum=weights @ self.centered_sum,
            centered_square=weights @ self.centered_square,
        )

    def total(self) -> EpisodeSums:
        return self.weighted(np.ones(self.count.shape[0]))


def episode_sums(
    targets: np.ndarray, predictions: np.ndarray, reference: np.ndarray
) -> EpisodeSums:
    """Per-episode sums from (n_episodes, T, k) targets and predictions; reference is (k,)."""
    targets = np.asarray(targets, dtype=np.float64)
    predictions = np.asarray(predictions, dtype=np.float64)
    if targets.ndim != 3 or targets.shape != predictions.shape:
        raise ValueError(
            "targets and predictions must both be (n_episodes, T, k), got "
            f"{targets.shape} and {predictions.shape}"
        )
    centered = targets - np.asarray(reference, dtype=np.float64)
    return EpisodeSums(
        count=np.full(targets.shape[0], float(targets.shape[1])),
        squared_error=((targets - predictions) ** 2).sum(axis=1),
        centered_sum=centered.sum(axis=1),
        centered_square=(centered**2).sum(axis=1),
    )


@dataclass(frozen=True)
class Scores:
    """Scores with the leading shape of the sums they came from (scalars for a total)."""

    r2: np.ndarray  # (..., k)
    r2_pooled: np.ndarray  # (...)
    mse: np.ndarray  # (..., k)
    mse_pooled: np.ndarray
    rmse: np.ndarray  # (..., k)
    rmse_pooled: np.ndarray
    mse_train_mean: np.ndarray  # (..., k)
    mse_train_mean_pooled: np.ndarray
    mse_best_constant: np.ndarray  # (..., k)
    mse_best_constant_pooled: np.ndarray


def scores(sums: EpisodeSums, include: np.ndarray | None = None) -> Scores:
    """Scores of summed statistics; `include` (k,) bools picks the targets pooled R² uses."""
    n = sums.count[..., None]
    # Total sum of squares about the data's own mean, from sums about the reference.
    sst = np.maximum(sums.centered_square - sums.centered_sum**2 / n, 0.0)
    sse = sums.squared_error
    keep = np.ones(sst.shape[-1], dtype=bool) if include is None else np.asarray(include, bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(sst > 0, 1.0 - sse / sst, np.nan)
        sst_all = (sst * keep).sum(axis=-1)
        r2_pooled = np.where(sst_all > 0, 1.0 - (sse * keep).sum(axis=-1) / sst_all, np.nan)
    mse = sse / n
    mse_pooled = mse.mean(axis=-1)
    return Scores(
        r2=r2,
        r2_pooled=r2_pooled,
        mse=mse,
        mse_pooled=mse_pooled,
        rmse=np.sqrt(mse),
        rmse_pooled=np.sqrt(mse_pooled),
        mse_train_mean=sums.centered_square / n,
        mse_train_mean_pooled=(sums.centered_square / n).mean(axis=-1),
        mse_best_constant=sst / n,
        mse_best_constant_pooled=(sst / n).mean(axis=-1),
    )

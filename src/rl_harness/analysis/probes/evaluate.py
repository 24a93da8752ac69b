"""Fit an affine probe on training episodes and score it on held-out ones, with intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rl_harness.analysis.probes.affine import AffineProbe, fit_affine
from rl_harness.analysis.probes.bootstrap import Estimate, bootstrap_weights, estimates
from rl_harness.analysis.probes.scores import episode_sums, scores
from rl_harness.analysis.probes.split import split_episodes
from rl_harness.seeding import stream_rng

DEFAULT_STREAM = ("analysis", "probe")


@dataclass(frozen=True)
class ProbeReport:
    """Held-out scores of one affine probe; intervals are bootstrap over test episodes.

    The probe is held fixed while test episodes are resampled, so an interval covers the
    evaluation's sampling noise, not the variability of the fit itself.
    """

    target_names: list[str]
    r2_pooled: Estimate
    r2: dict[str, Estimate]
    rmse_pooled: Estimate
    rmse: dict[str, Estimate]
    mse_pooled: Estimate
    mse_train_mean_pooled: Estimate  # baseline: predict the train mean
    mse_best_constant_pooled: Estimate  # baseline: the best constant (the test data's mean)
    train_r2_pooled: float
    n_features: int
    n_train_episodes: int
    n_test_episodes: int
    n_train_samples: int
    n_test_samples: int
    ridge: float
    test_fraction: float
    n_bootstrap: int
    confidence: float
    seed: int
    stream: list[str] = field(default_factory=lambda: list(DEFAULT_STREAM))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if isinstance(value, Estimate):
                out[name] = value.to_dict()
            elif isinstance(value, dict):
                out[name] = {key: est.to_dict() for key, est in value.items()}
            else:
                out[name] = value
        return out


@dataclass(frozen=True)
class ProbeEvaluation:
    report: ProbeReport
    probe: AffineProbe
    train_episodes: np.ndarray  # indices into the episode axis
    test_episodes: np.ndarray
    test_predictions: np.ndarray  # (n_test_episodes, T, k)


def _episode_array(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 3 or min(array.shape) == 0:
        raise ValueError(f"{name} must be a non-empty (n_episodes, T, m) array, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def evaluate_probe(
    representations: np.ndarray,
    targets: np.ndarray,
    *,
    seed: int,
    ridge: float = 0.0,
    test_fraction: float = 0.25,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    target_names: Sequence[str] | None = None,
    stream: Sequence[str] = DEFAULT_STREAM,
) -> ProbeEvaluation:
    """Probe (n_episodes, T, d) representations for (n_episodes, T, k) targets.

    The split and the bootstrap draw from the named streams `(*stream, "split")` and
    `(*stream, "bootstrap")` of `seed`.
    """
    x = _episode_array("representations", representations)
    y = _episode_array("targets", targets)
    if x.shape[:2] != y.shape[:2]:
        raise ValueError(
            f"representations {x.shape} and targets {y.shape} differ in (n_episodes, T)"
        )
    k = y.shape[2]
    names = [f"target_{i}" for i in range(k)] if target_names is None else list(target_names)
    if len(names) != k:
        raise ValueError(f"{len(names)} target names for {k} targets")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be a positive int, got {n_bootstrap!r}")

    stream = tuple(stream)
    train, test = split_episodes(x.shape[0], test_fraction, stream_rng(seed, *stream, "split"))
    d, steps = x.shape[2], x.shape[1]
    probe = fit_affine(x[train].reshape(-1, d), y[train].reshape(-1, k), ridge)
    reference = y[train].reshape(-1, k).mean(axis=0)
    train_pred = probe.predict(x[train].reshape(-1, d)).reshape(len(train), steps, k)
    test_pred = probe.predict(x[test].reshape(-1, d)).reshape(len(test), steps, k)
    train_scores = scores(episode_sums(y[train], train_pred, reference).total())

    per_episode = episode_sums(y[test], test_pred, reference)
    point = scores(per_episode.total())
    weights = bootstrap_weights(len(test), n_bootstrap, stream_rng(seed, *stream, "bootstrap"))
    boot = scores(per_episode.weighted(weights.astype(np.float64)))

    def one(values: np.ndarray, samples: np.ndarray) -> Estimate:
        return estimates(values, samples[:, None], confidence)[0]

    def per_target(values: np.ndarray, samples: np.ndarray) -> dict[str, Estimate]:
        return dict(zip(names, estimates(values, samples, confidence), strict=True))

    report = ProbeReport(
        target_names=names,
        r2_pooled=one(point.r2_pooled, boot.r2_pooled),
        r2=per_target(point.r2, boot.r2),
        rmse_pooled=one(point.rmse_pooled, boot.rmse_pooled),
        rmse=per_target(point.rmse, boot.rmse),
        mse_pooled=one(point.mse_pooled, boot.mse_pooled),
        mse_train_mean_pooled=one(point.mse_train_mean_pooled, boot.mse_train_mean_pooled),
        mse_best_constant_pooled=one(point.mse_best_constant_pooled, boot.mse_best_constant_pooled),
        train_r2_pooled=float(train_scores.r2_pooled),
        n_features=d,
        n_train_episodes=len(train),
        n_test_episodes=len(test),
        n_train_samples=len(train) * steps,
        n_test_samples=len(test) * steps,
        ridge=float(ridge),
        test_fraction=float(test_fraction),
        n_bootstrap=n_bootstrap,
        confidence=float(confidence),
        seed=int(seed),
        stream=list(stream),
    )
    return ProbeEvaluation(report, probe, train, test, test_pred)

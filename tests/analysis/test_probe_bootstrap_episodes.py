"""Probe intervals resample whole episodes: with correlated steps they are wide, as they must be.

Each episode carries one shared offset in its target that the representation cannot see,
so its steps' errors are (almost) perfectly correlated. Resampling steps would treat
50 x 40 steps as 2000 independent draws and give intervals several times too narrow.
"""

from __future__ import annotations

import numpy as np

from rl_harness.analysis import ProbeSettings
from rl_harness.analysis.probes import evaluate_probe
from rl_harness.analysis.probes.affine import fit_affine
from rl_harness.analysis.probes.bootstrap import bootstrap_weights, estimates
from rl_harness.analysis.probes.scores import episode_sums, scores
from rl_harness.analysis.probes.split import split_episodes
from rl_harness.seeding import stream_rng

STREAM = ("analysis", "probe")
SEED, N_BOOT, CONFIDENCE, TEST_FRACTION = 4, 400, 0.95, 0.25


def correlated_episodes(n_episodes: int = 200, steps: int = 40):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_episodes, steps, 1))
    offset = rng.normal(size=(n_episodes, 1, 1))  # one draw per episode, shared by its steps
    y = x + offset + 0.05 * rng.normal(size=x.shape)
    return x, y


def _intervals(sums, n_units: int, rng) -> tuple[float, float, float]:
    weights = bootstrap_weights(n_units, N_BOOT, rng).astype(np.float64)
    est = estimates(
        scores(sums.total()).r2_pooled,
        scores(sums.weighted(weights)).r2_pooled[:, None],
        CONFIDENCE,
    )[0]
    return est.value, est.low, est.high


def test_probe_intervals_are_the_episode_bootstrap():
    x, y = correlated_episodes()
    report = evaluate_probe(
        x,
        y,
        ProbeSettings(
            seed=SEED, n_bootstrap=N_BOOT, confidence=CONFIDENCE, test_fraction=TEST_FRACTION
        ),
    ).report

    # The correct computation, step by step: episode split, fit, per-episode sums,
    # episode bootstrap from the documented stream.
    train, test = split_episodes(len(x), TEST_FRACTION, stream_rng(SEED, *STREAM, "split"))
    probe = fit_affine(x[train].reshape(-1, 1), y[train].reshape(-1, 1), 0.0)
    pred = probe.predict(x[test].reshape(-1, 1)).reshape(y[test].shape)
    reference = y[train].reshape(-1, 1).mean(axis=0)
    by_episode = episode_sums(y[test], pred, reference)
    value, low, high = _intervals(by_episode, len(test), stream_rng(SEED, *STREAM, "bootstrap"))
    est = report.r2_pooled
    np.testing.assert_allclose([est.value, est.low, est.high], [value, low, high], rtol=1e-12)

    # The same data resampled step by step: each step its own "episode".
    by_step = episode_sums(y[test].reshape(-1, 1, 1), pred.reshape(-1, 1, 1), reference)
    _, step_low, step_high = _intervals(
        by_step, by_step.count.shape[0], stream_rng(SEED, *STREAM, "bootstrap")
    )
    # Steps within an episode share their offset: the honest interval is over twice as wide.
    assert (high - low) > 2 * (step_high - step_low), (high - low, step_high - step_low)

"""Probe math on data whose answer is known: exact linear maps, pure noise, known R²."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis.probes import (
    bootstrap_weights,
    episode_sums,
    evaluate_probe,
    fit_affine,
    percentile_interval,
    scores,
    split_episodes,
)


def linear_episodes(rng, n_episodes=60, steps=20, d=5, k=3, noise=0.0):
    """x ~ N(0, I); y = x W + b + noise. Population R² per target: |W_k|² / (|W_k|² + noise²)."""
    x = rng.normal(size=(n_episodes, steps, d))
    w = rng.normal(size=(d, k))
    b = rng.normal(size=k)
    y = x @ w + b + noise * rng.normal(size=(n_episodes, steps, k))
    return x, y, w, b


def test_least_squares_recovers_an_exact_affine_map():
    x, y, w, b = linear_episodes(np.random.default_rng(0))
    probe = fit_affine(x.reshape(-1, 5), y.reshape(-1, 3))
    np.testing.assert_allclose(probe.weights, w, atol=1e-10)
    np.testing.assert_allclose(probe.bias, b, atol=1e-10)
    report = evaluate_probe(x, y, seed=1, n_bootstrap=50).report
    assert report.r2_pooled.value == pytest.approx(1.0, abs=1e-12)
    assert all(est.value == pytest.approx(1.0, abs=1e-12) for est in report.r2.values())
    assert report.rmse_pooled.value < 1e-10


def test_ridge_shrinks_weights_but_not_the_bias():
    rng = np.random.default_rng(1)
    x, y, w, b = linear_episodes(rng, noise=0.1)
    x2, y2 = x.reshape(-1, 5) + 3.0, y.reshape(-1, 3)  # offset features: bias must absorb it
    plain = fit_affine(x2, y2)
    heavy = fit_affine(x2, y2, ridge=1e9)
    # Matches the closed form (Xc'Xc + λI)^-1 Xc'Yc on centred data.
    lam = 10.0
    xc, yc = x2 - x2.mean(0), y2 - y2.mean(0)
    closed = np.linalg.solve(xc.T @ xc + lam * np.eye(5), xc.T @ yc)
    np.testing.assert_allclose(fit_affine(x2, y2, ridge=lam).weights, closed, rtol=1e-8)
    assert np.abs(heavy.weights).max() < 1e-4 < np.abs(plain.weights).max()
    # With the weights shrunk to zero the bias is the target mean: it is not penalized.
    np.testing.assert_allclose(heavy.bias, y2.mean(0), atol=1e-3)


def test_noise_targets_score_near_zero_and_no_better_than_the_mean():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(200, 25, 8))
    y = rng.normal(size=(200, 25, 3))  # independent of x
    report = evaluate_probe(x, y, seed=3, n_bootstrap=200).report
    # Held out, a probe fit to noise does slightly worse than the mean (R² just below 0).
    assert -0.02 < report.r2_pooled.value <= 0.0
    assert -0.05 < report.r2_pooled.low and report.r2_pooled.high < 0.02
    assert report.train_r2_pooled > report.r2_pooled.value  # the fit overfits noise a little
    # The probe cannot beat the best constant, and the train mean is close to it.
    assert report.mse_pooled.value >= report.mse_best_constant_pooled.value
    assert report.mse_train_mean_pooled.value >= report.mse_best_constant_pooled.value
    assert report.mse_pooled.value == pytest.approx(1.0, abs=0.05)


def test_scores_match_direct_formulas():
    rng = np.random.default_rng(4)
    y = rng.normal(size=(7, 9, 2)) * [1.0, 3.0]
    pred = y + rng.normal(size=y.shape) * [0.5, 1.0]
    reference = np.array([0.3, -0.2])
    got = scores(episode_sums(y, pred, reference).total())
    flat_y, flat_p = y.reshape(-1, 2), pred.reshape(-1, 2)
    sse = ((flat_y - flat_p) ** 2).sum(0)
    sst = ((flat_y - flat_y.mean(0)) ** 2).sum(0)
    np.testing.assert_allclose(got.r2, 1 - sse / sst)
    np.testing.assert_allclose(got.r2_pooled, 1 - sse.sum() / sst.sum())
    np.testing.assert_allclose(got.rmse_pooled, np.sqrt(((flat_y - flat_p) ** 2).mean()))
    np.testing.assert_allclose(got.mse_best_constant, flat_y.var(0))
    np.testing.assert_allclose(got.mse_train_mean, ((flat_y - reference) ** 2).mean(0))


def test_bootstrap_resamples_are_the_scores_of_resampled_episodes():
    rng = np.random.default_rng(5)
    y = rng.normal(size=(6, 4, 2))
    pred = y + rng.normal(size=y.shape)
    sums = episode_sums(y, pred, np.zeros(2))
    weights = bootstrap_weights(6, 3, np.random.default_rng(0))
    assert weights.shape == (3, 6) and np.all(weights.sum(1) == 6)
    batched = scores(sums.weighted(weights.astype(float)))
    for row, counts in enumerate(weights):
        picked = np.repeat(np.arange(6), counts)
        direct = scores(episode_sums(y[picked], pred[picked], np.zeros(2)).total())
        np.testing.assert_allclose(batched.r2_pooled[row], direct.r2_pooled)
        np.testing.assert_allclose(batched.r2[row], direct.r2)


def test_bootstrap_intervals_cover_the_true_r2():
    # y = x·w + noise with |w|² = noise² = 1: the population R² is exactly 0.5.
    covered, trials, widths = 0, 40, []
    for trial in range(trials):
        rng = np.random.default_rng(100 + trial)
        x = rng.normal(size=(120, 10, 1))
        y = x + rng.normal(size=x.shape)
        est = evaluate_probe(x, y, seed=trial, n_bootstrap=300).report.r2_pooled
        assert est.low < est.value < est.high
        covered += est.low <= 0.5 <= est.high
        widths.append(est.high - est.low)
    # Nominal 95%; allow for the small fit bias and Monte Carlo error of 40 trials.
    assert covered >= 33, f"95% intervals covered the truth in only {covered}/{trials} trials"
    # ...without being vacuous: with 300 test steps (30 episodes) the R² standard error is
    # about sqrt(4 R²(1 - R²)² / n) = 0.04, so a 95% interval spans about 0.16.
    assert 0.08 < np.mean(widths) < 0.25, np.mean(widths)


def test_split_is_by_episode_and_seeded():
    train, test = split_episodes(10, 0.3, np.random.default_rng(7))
    again = split_episodes(10, 0.3, np.random.default_rng(7))
    assert len(test) == 3 and len(train) == 7
    assert set(train) | set(test) == set(range(10)) and not set(train) & set(test)
    np.testing.assert_array_equal(train, again[0])
    assert split_episodes(2, 0.9, np.random.default_rng(0))[0].size == 1


def test_evaluation_is_reproducible_and_seed_dependent():
    x, y, _, _ = linear_episodes(np.random.default_rng(8), noise=2.0)
    first = evaluate_probe(x, y, seed=11, n_bootstrap=100).report.to_dict()
    assert first == evaluate_probe(x, y, seed=11, n_bootstrap=100).report.to_dict()
    assert first != evaluate_probe(x, y, seed=12, n_bootstrap=100).report.to_dict()
    assert first["r2_pooled"].keys() == {"value", "low", "high"}
    assert first["n_test_episodes"] + first["n_train_episodes"] == 60


def test_percentile_interval_of_known_samples():
    low, high = percentile_interval(np.arange(1001.0), 0.9)
    assert low == pytest.approx(50.0) and high == pytest.approx(950.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"representations": np.zeros((4, 3))}, "n_episodes, T, m"),
        ({"targets": np.full((4, 5, 2), np.nan)}, "NaN"),
        ({"targets": np.zeros((4, 6, 2))}, "differ"),
        ({"target_names": ["a"]}, "1 target names for 2 targets"),
        ({"n_bootstrap": 0}, "n_bootstrap"),
        ({"ridge": -1.0}, "ridge"),
        ({"test_fraction": 1.5}, "test_fraction"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    args = {"representations": np.zeros((4, 5, 3)), "targets": np.zeros((4, 5, 2))} | kwargs
    with pytest.raises(ValueError, match=match):
        evaluate_probe(args.pop("representations"), args.pop("targets"), seed=0, **args)

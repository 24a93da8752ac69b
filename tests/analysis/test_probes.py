"""Probe math on data whose answer is known: exact linear maps, pure noise, known R²."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from rl_harness.analysis import ProbeSettings
from rl_harness.analysis.probes import (
    bootstrap_weights,
    branch_ids,
    branch_sums,
    episode_sums,
    evaluate_probe,
    fit_affine,
    percentile_interval,
    scores,
    split_episodes,
    within_scores,
)
from rl_harness.seeding import stream_rng


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
    report = evaluate_probe(x, y, ProbeSettings(seed=1, n_bootstrap=50)).report
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
    report = evaluate_probe(x, y, ProbeSettings(seed=3, n_bootstrap=200)).report
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
        est = evaluate_probe(x, y, ProbeSettings(seed=trial, n_bootstrap=300)).report.r2_pooled
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
    first = evaluate_probe(x, y, ProbeSettings(seed=11, n_bootstrap=100)).report.to_dict()
    assert first == evaluate_probe(x, y, ProbeSettings(seed=11, n_bootstrap=100)).report.to_dict()
    assert first != evaluate_probe(x, y, ProbeSettings(seed=12, n_bootstrap=100)).report.to_dict()
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
    fields = {
        key: args.pop(key) for key in ("n_bootstrap", "ridge", "test_fraction") if key in args
    }
    with pytest.raises(ValueError, match=match):
        evaluate_probe(
            args.pop("representations"),
            args.pop("targets"),
            ProbeSettings(seed=0, **fields),
            **args,
        )


# ------------------------------------------------------------------ within-branch, nulls


def test_branch_ids_group_equal_recent_tokens():
    tokens = np.array([[0, 1, 0, 1], [1, 0, 1, 0]])
    np.testing.assert_array_equal(branch_ids(tokens, 0), np.zeros((2, 4)))
    last = branch_ids(tokens, 1)
    assert (last == last[0, 0]).sum() == 4 and len(np.unique(last)) == 2
    pairs = branch_ids(tokens, 2)
    # (0,1) at steps 1 and 3 of episode 0 and step 2 of episode 1; step 0 has a short history.
    assert pairs[0, 1] == pairs[0, 3] == pairs[1, 2] and pairs[0, 0] not in pairs[:, 1:]
    assert pairs[0, 0] != pairs[1, 0] and len(np.unique(pairs)) == 4
    with pytest.raises(ValueError, match="k must be an int >= 0"):
        branch_ids(tokens, -1)


def test_within_branch_r2_is_the_r2_of_each_branch_pooled():
    rng = np.random.default_rng(20)
    y = rng.normal(size=(5, 6, 2))
    pred = y + rng.normal(size=y.shape) * 0.5
    labels = rng.integers(0, 3, size=(5, 6))
    labels[0, 0] = 7  # a branch with a single step: no within variance, left out
    got = within_scores(branch_sums(y, pred, labels).total())
    sse = sst = 0.0
    for label in (0, 1, 2):
        mask = labels == label
        sse = sse + ((y[mask] - pred[mask]) ** 2).sum(0)
        sst = sst + ((y[mask] - y[mask].mean(0)) ** 2).sum(0)
    np.testing.assert_allclose(got.r2[0], 1 - sse / sst)
    np.testing.assert_allclose(got.r2_pooled[0], 1 - sse.sum() / sst.sum())
    assert got.branches_used[0] == 3 and got.steps_used[0] == 29
    # Bootstrap weights give the scores of the resampled episodes.
    weights = bootstrap_weights(5, 2, np.random.default_rng(1)).astype(float)
    batched = within_scores(branch_sums(y, pred, labels).weighted(weights))
    for row, counts in enumerate(weights.astype(int)):
        picked = np.repeat(np.arange(5), counts)
        direct = within_scores(branch_sums(y[picked], pred[picked], labels[picked]).total())
        np.testing.assert_allclose(batched.r2_pooled[row], direct.r2_pooled[0])


def test_within_branch_separates_memory_from_reading_the_last_token():
    rng = np.random.default_rng(21)
    episodes, steps = 120, 10
    tokens = rng.integers(0, 3, size=(episodes, steps))
    hidden = rng.normal(size=(episodes, steps))
    table = np.array([0.0, 2.0, -1.0])
    beliefs = np.stack([table[tokens] + hidden, table[tokens]], axis=-1)
    one_hot = np.eye(3)[tokens]
    memory = np.concatenate([one_hot, hidden[..., None]], axis=-1)
    settings = ProbeSettings(seed=2, n_bootstrap=200, branch_depth=1)
    kwargs = dict(branch_tokens=tokens, target_names=["mixed", "table"])
    reader = evaluate_probe(one_hot, beliefs, settings, **kwargs).report
    remembers = evaluate_probe(memory, beliefs, settings, **kwargs).report
    # Globally the token reader explains a lot; within branches of the last token nothing.
    assert reader.r2["mixed"].value > 0.6
    assert -0.05 < reader.within_branch.r2_pooled.value <= 0.0
    assert remembers.within_branch.r2_pooled.value == pytest.approx(1.0, abs=1e-9)
    low, high = reader.within_branch.r2_pooled.low, reader.within_branch.r2_pooled.high
    assert low < reader.within_branch.r2_pooled.value < high
    # 'table' never varies inside a branch: undefined there, excluded from the pooled score.
    within = remembers.within_branch.to_dict()
    assert within["r2"]["table"] is None and within["r2_pooled_excludes"] == ["table"]
    assert "never varies within branches of the last 1 tokens" in within["undefined"]["table"]
    assert within["k"] == 1 and within["n_branches"] == within["n_branches_used"] == 3
    # k = 0 is one branch: within-branch R² is the global R².
    everything = evaluate_probe(
        one_hot, beliefs, dataclasses.replace(settings, branch_depth=0), **kwargs
    ).report
    assert everything.within_branch.r2_pooled.value == pytest.approx(
        everything.r2_pooled.value, abs=1e-12
    )


def test_zero_variance_target_is_undefined_not_a_huge_negative():
    rng = np.random.default_rng(22)
    x = rng.normal(size=(40, 8, 2))
    signal = x @ np.array([[1.0], [-0.5]])
    constant = np.full_like(signal, 0.1) + 1e-17 * rng.normal(size=signal.shape)
    y = np.concatenate([signal + 0.1 * rng.normal(size=signal.shape), constant], axis=-1)
    report = evaluate_probe(
        x, y, ProbeSettings(seed=1, n_bootstrap=100), target_names=["s", "c"]
    ).report
    record = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert record["r2"]["c"] is None and record["r2_pooled_excludes"] == ["c"]
    assert record["undefined"]["c"].startswith("R² undefined: its held-out values never vary")
    # The pooled score is exactly the varying target's score.
    assert record["r2_pooled"] == record["r2"]["s"]
    assert record["r2"]["s"]["value"] > 0.9


def test_permutation_null_refits_on_shuffled_episodes():
    rng = np.random.default_rng(23)
    x, y, _, _ = linear_episodes(rng, noise=1.0)
    report = evaluate_probe(x, y, ProbeSettings(seed=4, n_bootstrap=50, n_permutations=40)).report
    null = report.permutation
    assert null.p_value == pytest.approx(1 / 41)  # the real fit beats every shuffle
    assert null.observed == report.r2_pooled.value and len(null.null_r2_pooled) == 40
    assert max(null.null_r2_pooled) < 0.1 and null.to_dict()["n_permutations"] == 40

    # Each null value is a plain refit on explicitly shuffled episodes.
    split = evaluate_probe(x, y, ProbeSettings(seed=4, n_bootstrap=50))
    train, test = split.train_episodes, split.test_episodes
    perm_rng = stream_rng(4, "analysis", "probe", "permutation")
    for value in null.null_r2_pooled[:3]:
        order_train, order_test = perm_rng.permutation(len(train)), perm_rng.permutation(len(test))
        k = y.shape[2]
        probe = fit_affine(x[train].reshape(-1, 5), y[train][order_train].reshape(-1, k))
        pred = probe.predict(x[test].reshape(-1, 5))
        target = y[test][order_test].reshape(-1, k)
        r2 = 1 - ((target - pred) ** 2).sum() / ((target - target.mean(0)) ** 2).sum()
        assert value == pytest.approx(r2, abs=1e-9)

    # Without signal the p-value is not small.
    noise = rng.normal(size=y.shape)
    pure = evaluate_probe(x, noise, ProbeSettings(seed=4, n_bootstrap=50, n_permutations=40)).report
    assert pure.permutation.p_value > 0.1

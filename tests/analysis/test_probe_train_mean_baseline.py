"""The probe's constant baseline is the *training* episodes' mean, never the held-out one.

`evaluate_probe` centres every episode's sums on a reference and reports
`mse_train_mean_pooled`, the held-out error of predicting that reference everywhere. On data
whose train and test means differ the train mean's error exceeds the best constant (the
test data's own variance) by the squared shift; a reference that saw the held-out targets
would shrink that gap or close it.
"""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import ProbeSettings, evaluate_probe
from rl_harness.analysis.probes import episode_sums, scores

N_EPISODES, STEPS, D = 10, 6, 3
SHIFT = np.array([3.0, -2.0])  # test episodes' targets are shifted by this much


def shifted_data(test: np.ndarray):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(N_EPISODES, STEPS, D))
    # Targets unrelated to x (a probe finds nothing), train around 0, test around SHIFT.
    y = rng.normal(size=(N_EPISODES, STEPS, 2))
    y[test] += SHIFT
    return x, y


def test_the_constant_baseline_is_the_mean_of_the_training_episodes():
    # The split depends only on the episode count and the seed: learn it first.
    probe_seed = 7
    blank = np.zeros((N_EPISODES, STEPS, 1))
    split = evaluate_probe(blank, blank + 1.0, ProbeSettings(seed=probe_seed, n_bootstrap=2))
    train, test = split.train_episodes, split.test_episodes
    assert len(test) >= 2 and len(train) >= 5

    x, y = shifted_data(test)
    evaluation = evaluate_probe(x, y, ProbeSettings(seed=probe_seed, n_bootstrap=200))
    report = evaluation.report
    np.testing.assert_array_equal(evaluation.train_episodes, train)
    np.testing.assert_array_equal(evaluation.test_episodes, test)

    train_mean = y[train].reshape(-1, 2).mean(axis=0)
    held_out = y[test].reshape(-1, 2)
    expected = ((held_out - train_mean) ** 2).mean(axis=0).mean()
    best_constant = held_out.var(axis=0).mean()
    assert report.mse_train_mean_pooled.value == pytest.approx(expected, rel=1e-12)
    assert report.mse_best_constant_pooled.value == pytest.approx(best_constant, rel=1e-12)
    # The gap is the squared distance between the two means, about |SHIFT|² / 2 here.
    gap = ((held_out.mean(axis=0) - train_mean) ** 2).mean()
    assert report.mse_train_mean_pooled.value - best_constant == pytest.approx(gap, rel=1e-9)
    assert gap > 5.0
    # The baseline's interval comes from the same reference: it lies far above the best one.
    assert report.mse_train_mean_pooled.low > report.mse_best_constant_pooled.high


def test_episode_sums_with_the_train_mean_give_the_train_mean_baseline():
    # The building block the evaluation uses, with the reference passed explicitly.
    rng = np.random.default_rng(0)
    y = rng.normal(size=(3, 4, 2)) + SHIFT
    reference = np.array([0.5, -0.5])
    total = scores(episode_sums(y, np.zeros_like(y), reference).total())
    np.testing.assert_allclose(
        total.mse_train_mean, ((y.reshape(-1, 2) - reference) ** 2).mean(axis=0), rtol=1e-12
    )
    np.testing.assert_allclose(total.mse_best_constant, y.reshape(-1, 2).var(axis=0), rtol=1e-12)

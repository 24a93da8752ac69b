"""The tests of the numbers that matter, on data with known answers: the conditional
permutation null of the within-branch R² (a representation with nothing beyond the branch is
not significant, one that carries the target sits at the p-value floor, and the test holds
its level under the null), and the paired episode bootstrap of R² differences."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import (
    ProbeSettings,
    conditional_permutation_null,
    evaluate_probe,
    held_out_scores,
    paired_difference,
)
from rl_harness.analysis.probes import bootstrap_weights, branch_ids, within_branch_shuffle


def branch_data(seed: int, episodes: int = 24, steps: int = 30, n_branches: int = 4):
    """Branch labels with branch-dependent target means and i.i.d. within-branch noise."""
    rng = np.random.default_rng(seed)
    branches = rng.integers(0, n_branches, size=(episodes, steps))
    means = rng.normal(size=(n_branches, 2))
    targets = means[branches] + rng.normal(scale=0.5, size=(episodes, steps, 2))
    one_hot = np.eye(n_branches)[branches]
    return rng, branches, targets, one_hot


def split(*arrays, n_train: int):
    return [a[:n_train] for a in arrays], [a[n_train:] for a in arrays]


def test_within_branch_shuffle_permutes_only_inside_each_branch():
    labels = np.array([0, 1, 0, 2, 1, 0, 2, 2, 1])
    order = within_branch_shuffle(labels, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(9))
    np.testing.assert_array_equal(labels[order], labels)
    assert not np.array_equal(order, np.arange(9))


def test_a_representation_with_nothing_beyond_the_branch_is_not_significant():
    # The representation is the branch itself: refits on targets shuffled within branches
    # give the same branch means, so every null value equals the observed one: p = 1.
    rng, branches, targets, one_hot = branch_data(0)
    (x_tr, y_tr, b_tr), (x_te, y_te, b_te) = split(one_hot, targets, branches, n_train=18)
    null = conditional_permutation_null(
        x_tr, y_tr, x_te, y_te, b_tr, b_te, ridge=0.0, n_permutations=19, rng=rng
    )
    np.testing.assert_allclose(null.null_r2_pooled, null.observed, atol=1e-12)
    assert null.p_value == 1.0
    assert null.p_value_floor == pytest.approx(1 / 20)
    record = null.to_dict()
    assert record["p_value_floor"] == pytest.approx(0.05) and record["n_permutations"] == 19
    assert record["statistic"].startswith("within_branch")


def test_a_representation_that_carries_the_target_sits_at_the_p_value_floor():
    rng, branches, targets, one_hot = branch_data(1)
    features = np.concatenate([one_hot, targets + rng.normal(scale=0.05, size=targets.shape)], -1)
    (x_tr, y_tr, b_tr), (x_te, y_te, b_te) = split(features, targets, branches, n_train=18)
    null = conditional_permutation_null(
        x_tr, y_tr, x_te, y_te, b_tr, b_te, ridge=0.0, n_permutations=49, rng=rng
    )
    assert null.observed > 0.95 and max(null.null_r2_pooled) < 0.3
    assert null.p_value == null.p_value_floor == pytest.approx(1 / 50)


def test_the_conditional_null_holds_its_level_when_nothing_beyond_the_branch_is_there():
    # Branch one-hot plus noise features independent of the targets: under this null the
    # p-value is (super-)uniform on {1/20, ..., 1}, so P(p <= 0.05) <= 0.05. Over 100 data
    # sets the count at the floor is Binomial(100, <= 0.05): more than 12 has chance < 0.3%.
    p_values = []
    for seed in range(100):
        rng, branches, targets, one_hot = branch_data(100 + seed, episodes=12, steps=20)
        noise = rng.normal(size=(*branches.shape, 3))
        features = np.concatenate([one_hot, noise], -1)
        (x_tr, y_tr, b_tr), (x_te, y_te, b_te) = split(features, targets, branches, n_train=8)
        null = conditional_permutation_null(
            x_tr, y_tr, x_te, y_te, b_tr, b_te, ridge=0.0, n_permutations=19, rng=rng
        )
        p_values.append(null.p_value)
    assert sum(p <= 0.05 + 1e-12 for p in p_values) <= 12
    assert 0.35 < np.mean(p_values) < 0.7


def test_evaluate_probe_runs_the_conditional_null_on_its_branches():
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 3, size=(20, 25))
    beliefs = rng.dirichlet(np.ones(3), size=(20, 25))
    features = np.concatenate([np.eye(3)[tokens], beliefs], -1)
    evaluation = evaluate_probe(
        features,
        beliefs,
        ProbeSettings(seed=0, n_bootstrap=20, branch_depth=1, n_within_permutations=9),
        branch_tokens=tokens,
    )
    within = evaluation.report.within_branch
    assert within.permutation.p_value == pytest.approx(0.1)  # the floor 1 / (9 + 1)
    assert within.permutation.observed == pytest.approx(within.r2_pooled.value, abs=1e-9)
    record = evaluation.report.to_dict()["within_branch"]["permutation"]
    assert record["p_value_floor"] == pytest.approx(0.1)
    assert evaluation.report.to_dict()["permutation"] is None


def test_the_paired_bootstrap_of_identical_predictions_is_exactly_zero():
    rng = np.random.default_rng(4)
    targets = rng.normal(size=(10, 15, 3))
    predictions = targets + rng.normal(scale=0.3, size=targets.shape)
    branches = {"tokens": branch_ids(rng.integers(0, 3, size=(10, 15)), 1)}
    weights = bootstrap_weights(10, 200, rng)
    difference = paired_difference(
        targets, predictions, predictions.copy(), weights=weights, branchings=branches
    )
    for estimate in (difference.r2_pooled, difference.within_branch["tokens"]):
        assert (estimate.value, estimate.low, estimate.high) == (0.0, 0.0, 0.0)
    assert difference.to_dict()["n_bootstrap"] == 200


def test_the_paired_difference_is_the_difference_of_the_scores_on_each_resample():
    rng = np.random.default_rng(5)
    targets = rng.normal(size=(12, 10, 2))
    perfect = targets.copy()
    mean = np.broadcast_to(targets.reshape(-1, 2).mean(0), targets.shape)
    weights = bootstrap_weights(12, 100, rng)
    difference = paired_difference(targets, perfect, mean, weights=weights)
    # R² 1 minus R² 0 of the held-out mean, on every resample the resample's own mean is
    # not the full sample's, so only the point value is exactly 1.
    assert difference.r2_pooled.value == pytest.approx(1.0, abs=1e-12)
    noisy = targets + rng.normal(scale=0.5, size=targets.shape)
    a = held_out_scores(targets, perfect, weights=weights)
    b = held_out_scores(targets, noisy, weights=weights)
    paired = paired_difference(targets, perfect, noisy, weights=weights)
    assert paired.r2_pooled.value == pytest.approx(a.r2_pooled.value - b.r2_pooled.value)
    # A scores 1 on every resample, so the difference's interval is 1 minus B's, mirrored.
    assert (a.r2_pooled.low, a.r2_pooled.high) == (1.0, 1.0)
    assert paired.r2_pooled.low == pytest.approx(1.0 - b.r2_pooled.high, abs=1e-12)
    assert paired.r2_pooled.high == pytest.approx(1.0 - b.r2_pooled.low, abs=1e-12)
    with pytest.raises(ValueError, match="weights must be"):
        paired_difference(targets, perfect, noisy, weights=weights[:, :5])


def test_the_conditional_null_equals_a_refit_per_permutation():
    # Shared SVD vs fit_affine + within_scores on each shuffle, same shuffles.
    from rl_harness.analysis.probes import branch_sums, fit_affine, within_scores

    rng, branches, targets, one_hot = branch_data(6, episodes=10, steps=12)
    features = np.concatenate([one_hot, rng.normal(size=(10, 12, 3)) + targets[..., :1]], -1)
    (x_tr, y_tr, b_tr), (x_te, y_te, b_te) = split(features, targets, branches, n_train=7)
    null = conditional_permutation_null(
        x_tr,
        y_tr,
        x_te,
        y_te,
        b_tr,
        b_te,
        ridge=0.0,
        n_permutations=5,
        rng=np.random.default_rng(11),
    )
    replay = np.random.default_rng(11)
    for value in [null.observed, *null.null_r2_pooled]:
        if value is null.observed:
            train, test = np.arange(y_tr[..., 0].size), np.arange(y_te[..., 0].size)
        else:
            train = within_branch_shuffle(b_tr, replay)
            test = within_branch_shuffle(b_te, replay)
        probe = fit_affine(x_tr.reshape(-1, 7), y_tr.reshape(-1, 2)[train])
        pred = probe.predict(x_te.reshape(-1, 7)).reshape(y_te.shape)
        shuffled = y_te.reshape(-1, 2)[test].reshape(y_te.shape)
        expected = within_scores(branch_sums(shuffled, pred, b_te).total()).r2_pooled[0]
        assert value == pytest.approx(expected, abs=1e-9)

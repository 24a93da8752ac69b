"""Statistics of the analysis layer on cases whose answer is known by hand: every score of
`scores` (per target and pooled), the percentile interval with NaN resamples, the within-branch
variance and branch counts, the probe's train R², the permutation null's p-value (ties
included) and its summary, the window table's `history_worth`, and the across-run mean and
Student-t interval of `compare`."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import ProbeSettings
from rl_harness.analysis.comparison import mean_interval
from rl_harness.analysis.probes import (
    branch_sums,
    episode_sums,
    evaluate_probe,
    percentile_interval,
    scores,
    within_scores,
)
from rl_harness.analysis.probes.bootstrap import Estimate
from rl_harness.analysis.probes.paired import HeldOutScores
from rl_harness.analysis.probes.permutation import PermutationNull, permutation_null
from rl_harness.analysis.windows import WindowComparison, WindowRegressor, WindowTable


def test_every_score_by_hand():
    # One episode, two steps, two targets; the reference (train mean) is 0.
    y = np.array([[[0.0, 0.0], [2.0, 4.0]]])
    prediction = np.array([[[1.0, 0.0], [1.0, 4.0]]])
    got = scores(episode_sums(y, prediction, np.zeros(2)).total())
    np.testing.assert_allclose(got.mse, [1.0, 0.0])  # SSE (2, 0) over 2 steps
    assert got.mse_pooled == pytest.approx(0.5)
    np.testing.assert_allclose(got.rmse, [1.0, 0.0])
    assert got.rmse_pooled == pytest.approx(np.sqrt(0.5))
    np.testing.assert_allclose(got.mse_best_constant, [1.0, 4.0])  # variances (SST 2, 8)
    assert got.mse_best_constant_pooled == pytest.approx(2.5)
    np.testing.assert_allclose(got.mse_train_mean, [2.0, 8.0])  # mean squares about 0
    assert got.mse_train_mean_pooled == pytest.approx(5.0)
    np.testing.assert_allclose(got.r2, [0.0, 1.0])
    assert got.r2_pooled == pytest.approx(1 - 2 / 10)
    only_first = scores(episode_sums(y, prediction, np.zeros(2)).total(), np.array([True, False]))
    assert only_first.r2_pooled == pytest.approx(0.0)


def test_percentile_interval_ignores_nan_resamples():
    samples = np.concatenate([np.arange(1001.0), [np.nan] * 50])
    low, high = percentile_interval(samples, 0.9)
    assert (low, high) == pytest.approx((50.0, 950.0))


def test_within_branch_variance_and_counts_by_hand():
    # One episode, branches 0 0 | 1 1 1 | 2: branch 0 (0, 2) has mean 1 and SST 2; branch 1
    # (1, 1, 4) mean 2 and SST 6; branch 2 has one step and is left out.
    labels = np.array([[0, 0, 1, 1, 1, 2]])
    y = np.array([0.0, 2.0, 1.0, 1.0, 4.0, 9.0]).reshape(1, 6, 1)
    prediction = y + np.array([1.0, 0.0, 0.0, 0.0, 0.0, 5.0]).reshape(1, 6, 1)
    got = within_scores(branch_sums(y, prediction, labels).total())
    assert got.steps_used[0] == 5 and got.branches_used[0] == 2
    assert got.variance[0, 0] == pytest.approx(8 / 5)
    assert got.r2_pooled[0] == pytest.approx(1 - 1 / 8)  # the single step's error not counted


def test_probe_report_within_branch_counts_are_the_held_out_steps():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 3, size=(12, 5))
    y = rng.normal(size=(12, 5, 1))
    evaluation = evaluate_probe(
        y,
        y,
        ProbeSettings(seed=1, n_bootstrap=5, branch_depth=1),
        branch_tokens=tokens,
    )
    report = evaluation.report.within_branch
    held = tokens[evaluation.test_episodes].ravel()
    values = y[evaluation.test_episodes].ravel()
    used = [t for t in np.unique(held) if (held == t).sum() >= 2]
    sst = sum(((values[held == t] - values[held == t].mean()) ** 2).sum() for t in used)
    steps = sum((held == t).sum() for t in used)
    assert report.n_branches == len(np.unique(held)) and report.n_branches_used == len(used)
    assert report.n_steps_used == steps
    assert report.within_variance["target_0"] == pytest.approx(sst / steps)


def test_train_r2_is_zero_for_a_probe_that_can_only_predict_the_train_mean():
    rng = np.random.default_rng(1)
    y = rng.normal(size=(20, 6, 2)) + [3.0, -1.0]
    constant = np.ones((20, 6, 1))  # no information: the fit is the train mean
    report = evaluate_probe(constant, y, ProbeSettings(seed=2, n_bootstrap=5)).report
    assert report.train_r2_pooled == pytest.approx(0.0, abs=1e-12)
    assert report.r2_pooled.value <= 0.0  # held out, the train mean is not the test mean
    # On a noisy linear case, the train R² by hand on the probe's train episodes.
    x = rng.normal(size=(20, 6, 3))
    y = x @ rng.normal(size=(3, 2)) + rng.normal(size=(20, 6, 2))
    evaluation = evaluate_probe(x, y, ProbeSettings(seed=2, n_bootstrap=5))
    train = evaluation.train_episodes
    fitted = evaluation.probe.predict(x[train].reshape(-1, 3))
    flat = y[train].reshape(-1, 2)
    by_hand = 1 - ((flat - fitted) ** 2).sum() / ((flat - flat.mean(0)) ** 2).sum()
    assert evaluation.report.train_r2_pooled == pytest.approx(by_hand, abs=1e-12)


def test_a_null_value_within_rounding_of_the_observed_one_reaches_it():
    # Every episode the same: any shuffle of whole episodes refits the same probe, so every
    # null value is the observed fit's R², up to the rounding of another solver.
    rng = np.random.default_rng(3)
    x = np.repeat(rng.normal(size=(1, 7, 2)), 10, axis=0)
    y = x @ np.array([[1.0], [0.5]]) + np.repeat(rng.normal(size=(1, 7, 1)), 10, axis=0)
    report = evaluate_probe(x, y, ProbeSettings(seed=4, n_bootstrap=5, n_permutations=9)).report
    assert report.permutation.p_value == 1.0
    assert report.permutation.to_dict()["null_mean"] == pytest.approx(
        report.r2_pooled.value, abs=1e-9
    )
    value = report.permutation.null_r2_pooled[0]
    train, test = x[:7], x[7:]

    def p_value(observed: float) -> float:
        null = permutation_null(
            train,
            y[:7],
            test,
            y[7:],
            observed=observed,
            ridge=0.0,
            n_permutations=9,
            rng=np.random.default_rng(0),
        )
        assert null.null_r2_pooled == pytest.approx([value] * 9, abs=1e-12)
        return null.p_value

    # A relative 1e-12 above every null value still counts as reached; 1e-6 above does not.
    assert p_value(value + 1e-12 * abs(value)) == 1.0
    assert p_value(value + 1e-6 * abs(value)) == pytest.approx(1 / 10)


def test_p_value_counts_the_null_values_that_reach_the_observed_one():
    rng = np.random.default_rng(5)
    x_train, x_test = rng.normal(size=(8, 4, 2)), rng.normal(size=(4, 4, 2))
    y_train, y_test = rng.normal(size=(8, 4, 1)), rng.normal(size=(4, 4, 1))
    kwargs = dict(ridge=0.0, n_permutations=30, rng=np.random.default_rng(6))
    values = permutation_null(x_train, y_train, x_test, y_test, observed=0.0, **kwargs)
    null = np.array(values.null_r2_pooled)
    observed = float(np.sort(null)[20])  # 10 null values reach it (ties: distinct here)
    again = permutation_null(
        x_train,
        y_train,
        x_test,
        y_test,
        observed=observed,
        **kwargs | {"rng": np.random.default_rng(6)},
    )
    assert again.null_r2_pooled == values.null_r2_pooled
    assert again.p_value == pytest.approx((1 + 10) / (1 + 30))


def test_permutation_record_summarizes_its_null():
    record = PermutationNull(observed=0.7, null_r2_pooled=list(np.arange(21) / 20), p_value=0.5)
    summary = record.to_dict()
    assert summary["null_mean"] == pytest.approx(0.5)
    assert summary["null_q95"] == pytest.approx(0.95)
    assert summary["p_value_floor"] == pytest.approx(1 / 22) and summary["n_permutations"] == 21


def _scores(value: float | None, low: float = 0.0, high: float = 0.0, within=None):
    estimate = None if value is None else Estimate(value, low, high)
    return HeldOutScores(estimate, within or {}, n_bootstrap=10, confidence=0.95)


def test_history_worth_by_hand():
    agent = _scores(0.8, within={"tokens_1": Estimate(0.6, 0.5, 0.7)})
    rows = [  # window R² 0.5, 0.8, 0.95; agent minus window intervals above, across, below 0
        (1, 0.5, (0.3, 0.2, 0.4), None),
        (2, 0.8, (0.0, -0.05, 0.05), 0.6),
        (3, 0.95, (-0.15, -0.2, -0.1), 0.65),
    ]
    table = WindowTable(
        agent=agent,
        rows=[
            WindowComparison(
                k=k,
                window=_scores(
                    value, within={"tokens_1": None if w is None else Estimate(w, w, w)}
                ),
                agent_minus_window=_scores(
                    *difference,
                    within={"tokens_1": None if w is None else Estimate(0.6 - w, 0.05, 0.1)},
                ),
                train_r2_pooled=1.0,
                n_inputs=k,
            )
            for k, value, difference, w in rows
        ],
        regressor=WindowRegressor(),
        seed=0,
        stream=["s"],
    )
    assert table.history_worth() == {
        # the window of 2 reaches the agent's 0.8 (>=); its difference interval holds 0
        "global": {"window_reaches_agent_at_k": 2, "agent_not_above_window_at_k": 2},
        # within branches: k = 2 reaches 0.6; no difference interval ever reaches 0
        "tokens_1": {"window_reaches_agent_at_k": 2, "agent_not_above_window_at_k": None},
    }


def test_mean_interval_known_cases():
    assert mean_interval([]).n == 0 and mean_interval([]).mean is None
    one = mean_interval([0.25])
    assert (one.n, one.mean, one.low, one.high) == (1, 0.25, None, None)
    same = mean_interval([2.0, 2.0, 2.0])  # zero spread: the interval is the point
    assert (same.mean, same.low, same.high) == (2.0, 2.0, 2.0)
    two = mean_interval([0.0, 2.0])  # sd sqrt(2), sem 1, t(0.975, 1 dof) = 12.7062047
    assert two.mean == 1.0
    assert (two.low, two.high) == pytest.approx((1 - 12.7062047, 1 + 12.7062047))

"""Window baselines: exact window features, quantile bins, an MLP that reaches R² 1 where the
belief is a function of the window and stays below 1 where it depends on older history, and
the comparison table against an agent's probe on the same split and resamples."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import (
    ProbeSettings,
    WindowRegressor,
    compare_with_windows,
    evaluate_probe,
    fit_window_baselines,
    quantile_bins,
    window_features,
)
from rl_harness.analysis.probes import branch_ids, split_episodes
from rl_harness.seeding import stream_rng

# The occupancy-control chain (rank 2; every row 0.10 on state 2).
BASE = np.array([[0.75, 0.15, 0.10], [0.15, 0.75, 0.10], [0.45, 0.45, 0.10]])
FAST = WindowRegressor(hidden=(64, 64), epochs=60, batch_size=256, learning_rate=5e-3)


def tilted(actions: np.ndarray) -> np.ndarray:
    """(n, 3, 3) U_a(j | i) = B(i, j) exp(theta[(j - i) mod 3]) / norm, theta = (0, a0, a1)."""
    theta = np.concatenate([np.zeros((len(actions), 1)), actions], axis=1)
    shift = (np.arange(3)[None, :] - np.arange(3)[:, None]) % 3
    weights = BASE[None] * np.exp(theta[:, shift])
    return weights / weights.sum(axis=2, keepdims=True)


def controlled_process(alpha: float, episodes: int, steps: int, warmup: int, seed: int):
    """Random tilts, tokens seen one step late; returns (inputs, beliefs) for the recorded
    steps and the warm-up inputs. State s_t emits o_t; input at t: the newest visible token
    o_{t-1} (one-hot) and the previous action a_{t-1}; target: the decision belief b_t =
    normalize(b_{t-1} E[:, o_{t-1}]) U_{a_{t-1}} (MESS3 emissions with `alpha`)."""
    rng = np.random.default_rng(seed)
    emit = np.full((3, 3), (1 - alpha) / 2) + (alpha - (1 - alpha) / 2) * np.eye(3)
    total = warmup + steps
    state = rng.choice(3, size=episodes, p=[0.45, 0.45, 0.10])
    belief = np.tile([0.45, 0.45, 0.10], (episodes, 1))
    inputs = np.zeros((episodes, total, 5))
    beliefs = np.zeros((episodes, total, 3))
    for t in range(total):
        token = (rng.random((episodes, 1)) > emit[state].cumsum(1)).sum(1)  # o_t, from s_t
        beliefs[:, t] = belief  # b_t: P(s_t | o_0..o_{t-1}, a_0..a_{t-1})
        actions = rng.uniform(-2.0, 2.0, size=(episodes, 2))
        moves = tilted(actions)
        if t + 1 < total:  # step t + 1 shows o_t and a_t
            inputs[np.arange(episodes), t + 1, token] = 1.0
            inputs[:, t + 1, 3:] = actions
        measured = belief * emit[:, token].T
        belief = np.einsum("ni,nij->nj", measured / measured.sum(1, keepdims=True), moves)
        state = (rng.random((episodes, 1)) > moves[np.arange(episodes), state].cumsum(1)).sum(1)
    return inputs[:, warmup:], beliefs[:, warmup:], inputs[:, :warmup]


def test_window_features_are_the_last_k_steps_newest_first_with_presence_flags():
    sequence = np.arange(1, 13, dtype=float).reshape(2, 3, 2)  # (E=2, T=3, m=2)
    features = window_features(sequence, 2)
    assert features.shape == (2, 3, 6)
    # Episode 0: steps (1,2), (3,4), (5,6). Step 0 has no previous entry.
    np.testing.assert_array_equal(features[0, 0], [1, 2, 1, 0, 0, 0])
    np.testing.assert_array_equal(features[0, 2], [5, 6, 1, 3, 4, 1])
    # A history of one step fills step 0's lag 1 with the history's last entry.
    history = -np.ones((2, 1, 2))
    with_history = window_features(sequence, 3, history)
    np.testing.assert_array_equal(with_history[0, 0], [1, 2, 1, -1, -1, 1, 0, 0, 0])
    np.testing.assert_array_equal(with_history[1, 2], [11, 12, 1, 9, 10, 1, 7, 8, 1])
    with pytest.raises(ValueError, match="the window k must be an int >= 1"):
        window_features(sequence, 0)


def test_quantile_bins_cut_each_coordinate_at_its_pooled_quantiles():
    values = np.stack([np.arange(8.0), -np.arange(8.0)], axis=-1).reshape(2, 4, 2)
    codes = quantile_bins(values, 4)
    np.testing.assert_array_equal(codes[..., 0].ravel(), [0, 0, 1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(codes[..., 1].ravel(), [3, 3, 2, 2, 1, 1, 0, 0])
    assert np.all(quantile_bins(values, 1) == 0)


def test_a_window_baseline_reaches_r2_one_where_the_belief_is_a_function_of_the_window():
    # alpha = 1: the newest visible token is the previous state, so b_t is row o_{t-1} of
    # U_{a_{t-1}}: a function of the one-step window (token and action).
    inputs, beliefs, history = controlled_process(1.0, 64, 100, 5, seed=0)
    train, test = split_episodes(64, 0.25, np.random.default_rng(0))
    fits = fit_window_baselines(
        inputs, beliefs, train=train, test=test, ks=[1], seed=0, history=history, regressor=FAST
    )
    y = beliefs[test]
    r2 = 1 - ((y - fits[0].test_predictions) ** 2).sum() / ((y - y.mean((0, 1))) ** 2).sum()
    assert r2 > 0.995 and fits[0].train_r2_pooled > 0.995
    assert fits[0].n_inputs == 6


def test_a_window_stays_below_one_where_the_belief_depends_on_older_history():
    inputs, beliefs, history = controlled_process(0.85, 64, 100, 5, seed=1)
    train, test = split_episodes(64, 0.25, np.random.default_rng(0))
    fits = fit_window_baselines(
        inputs, beliefs, train=train, test=test, ks=[1, 2], seed=0, history=history, regressor=FAST
    )
    y = beliefs[test]
    sst = ((y - y.mean((0, 1))) ** 2).sum()
    r2 = [1 - ((y - fit.test_predictions) ** 2).sum() / sst for fit in fits]
    assert r2[0] < 0.97 and r2[1] < 0.995  # strictly below 1: older tokens still matter
    assert r2[1] > r2[0] + 0.01  # and a longer window knows more


def test_window_baselines_are_deterministic_under_their_named_streams():
    inputs, beliefs, history = controlled_process(0.85, 12, 30, 3, seed=2)
    train, test = np.arange(8), np.arange(8, 12)
    small = WindowRegressor(hidden=(16,), epochs=3, batch_size=64)
    kwargs = dict(train=train, test=test, ks=[2], history=history, regressor=small)
    first = fit_window_baselines(inputs, beliefs, seed=5, **kwargs)[0].test_predictions
    again = fit_window_baselines(inputs, beliefs, seed=5, **kwargs)[0].test_predictions
    other = fit_window_baselines(inputs, beliefs, seed=6, **kwargs)[0].test_predictions
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_compare_with_windows_pairs_the_agent_with_each_window_on_its_own_resamples():
    inputs, beliefs, history = controlled_process(1.0, 40, 60, 5, seed=3)
    # An "agent" whose representation is the belief plus noise: global R² below 1.
    noise = np.random.default_rng(4).normal(scale=0.05, size=beliefs.shape)
    agent = evaluate_probe(beliefs + noise, beliefs, ProbeSettings(seed=7, n_bootstrap=50))
    tokens = inputs[..., :3].argmax(-1)
    branches = {"tokens_1": branch_ids(tokens, 1)}
    table = compare_with_windows(
        agent,
        inputs,
        beliefs,
        ks=[1, 2],
        seed=7,
        history=history,
        branchings=branches,
        regressor=FAST,
    )
    assert [row.k for row in table.rows] == [1, 2]
    assert table.agent.r2_pooled.value == pytest.approx(agent.report.r2_pooled.value)
    expected = stream_rng(7, "analysis", "probe", "bootstrap").multinomial(
        len(agent.test_episodes),
        np.full(len(agent.test_episodes), 1 / len(agent.test_episodes)),
        size=50,
    )
    np.testing.assert_array_equal(agent.bootstrap_weights, expected)
    for row in table.rows:
        difference = row.agent_minus_window.r2_pooled.value
        assert difference == pytest.approx(table.agent.r2_pooled.value - row.window.r2_pooled.value)
        assert row.window.r2_pooled.value > 0.99  # the belief is a function of the 1-window
    worth = table.history_worth()
    # The window of 1 already beats the noisy agent: memory worth nothing beyond it.
    assert worth["global"] == {"window_reaches_agent_at_k": 1, "agent_not_above_window_at_k": 1}
    assert set(worth) == {"global", "tokens_1"}
    record = table.to_dict()
    assert record["ks"] == [1, 2] and record["regressor"]["hidden"] == (64, 64)
    assert set(record["windows"][0]) == {
        "k",
        "window",
        "agent_minus_window",
        "train_r2_pooled",
        "n_inputs",
    }

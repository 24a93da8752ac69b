"""The window baseline is fitted on the agent probe's train episodes only and predicts its test
episodes: the rows its MLP is fitted to are exactly the train episodes' window features and
targets, and the rows it predicts are exactly the test episodes'; its recorded train R² is
the fit's on those train rows. (A baseline fitted on the
test steps would score itself on the data it was fitted to.)"""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import (
    ProbeSettings,
    WindowRegressor,
    compare_with_windows,
    evaluate_probe,
    window_features,
)
from rl_harness.analysis import windows as windows_module

TINY = WindowRegressor(hidden=(8,), epochs=1, batch_size=64)


def test_the_window_baseline_is_fitted_on_the_agent_probes_train_episodes(monkeypatch):
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(12, 10, 4))
    history = rng.normal(size=(12, 3, 4))
    beliefs = rng.dirichlet(np.ones(3), size=(12, 10))
    agent = evaluate_probe(
        beliefs + 0.1 * inputs[..., :3], beliefs, ProbeSettings(seed=3, n_bootstrap=10)
    )
    train, test = agent.train_episodes, agent.test_episodes
    assert len(train) and len(test) and not set(train) & set(test)

    fitted = []
    fit_predict_many = windows_module.fit_predict_many

    def spy(tasks, regressor, memo=None):
        out = fit_predict_many(tasks, regressor, memo)
        for task, (train_pred, _) in zip(tasks, out, strict=True):
            fitted.append((task.x_train, task.y_train, task.x_test, train_pred))
        return out

    monkeypatch.setattr(windows_module, "fit_predict_many", spy)
    table = compare_with_windows(
        agent, inputs, beliefs, ks=[1, 2], seed=3, history=history, regressor=TINY
    )
    assert [row.k for row in table.rows] == [1, 2] and len(fitted) == 2
    for row, (x_train, y_train, x_test, train_pred) in zip(table.rows, fitted, strict=True):
        k = row.k
        features = window_features(inputs, k, history)
        width = features.shape[-1]
        np.testing.assert_array_equal(x_train, features[train].reshape(-1, width))
        np.testing.assert_array_equal(y_train, beliefs[train].reshape(-1, 3))
        np.testing.assert_array_equal(x_test, features[test].reshape(-1, width))
        # The recorded train R² is that of the fit on the rows it was fitted to.
        sst = ((y_train - y_train.mean(axis=0)) ** 2).sum()
        assert row.train_r2_pooled == pytest.approx(1 - ((y_train - train_pred) ** 2).sum() / sst)

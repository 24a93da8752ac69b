"""The incremental test's cross-fitted read-out from per-fold factors (issue 53 item 2): a
ridge fit on a union of row blocks (`block_ridge`) is `ridge_solver`'s fit on those rows to
float rounding, on full-rank and rank-deficient (a layer norm's hyperplane) representations,
at ridge 0 and above; the read-out equals the one refitted per fold from the rows."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis.incremental import window_residual_readout
from rl_harness.analysis.probes import fit_affine, ridge_solver
from rl_harness.analysis.probes.affine import block_ridge, row_blocks


def _data(rank_deficient: bool, n: int = 600, d: int = 12, m: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 10.0, size=d) + rng.normal(size=d) * 5
    if rank_deficient:  # every row on one hyperplane, as a layer norm's output
        x -= x.mean(axis=1, keepdims=True)
    y = x[:, :m] @ rng.normal(size=(m, m)) + rng.normal(size=(n, m)) + 3.0
    return x, y


@pytest.mark.parametrize("rank_deficient", [False, True])
@pytest.mark.parametrize("ridge", [0.0, 2.5])
def test_a_union_of_blocks_is_the_fit_on_its_rows(rank_deficient, ridge):
    x, y = _data(rank_deficient)
    blocks = [np.arange(i, 600, 5) for i in range(5)]  # interleaved, as the folds
    factors = row_blocks(x, y, blocks)
    for which in ([0, 1, 2, 3, 4], [1, 2, 3, 4], [0, 3], [2]):
        rows = np.concatenate([blocks[b] for b in which])
        solver = ridge_solver(x[rows], ridge)
        expected = solver.weights(y[rows] - y[rows].mean(axis=0))
        mean, weights = block_ridge(factors, which, ridge)
        np.testing.assert_allclose(mean, solver.x_mean, rtol=1e-12, atol=1e-12)
        # The predictions are the fit's (the weights too: the minimum-norm solution).
        np.testing.assert_allclose(
            (x - mean) @ weights, (x - solver.x_mean) @ expected, rtol=1e-9, atol=1e-9
        )
        np.testing.assert_allclose(weights, expected, rtol=1e-8, atol=1e-9)
    if rank_deficient:  # the null direction is dropped, not inverted
        null = np.ones(x.shape[1]) / np.sqrt(x.shape[1])
        assert np.abs(null @ block_ridge(factors, [0, 1], ridge)[1]).max() < 1e-9


def test_bad_blocks_and_ridges_are_refused():
    x, y = _data(False, n=20)
    with pytest.raises(ValueError, match="at least one row"):
        row_blocks(x, y, [np.arange(10), np.arange(0)])
    with pytest.raises(ValueError, match="rows of x"):
        row_blocks(x, y[:5], [np.arange(5)])
    factors = row_blocks(x, y, [np.arange(10), np.arange(10, 20)])
    with pytest.raises(ValueError, match="at least one block"):
        block_ridge(factors, [])
    with pytest.raises(ValueError, match="ridge"):
        block_ridge(factors, [0], -1.0)


def _readout_refitted(rep, window, y, train, n_folds=5):
    """The read-out with every fit refitted on its rows (`ridge_solver` per fold)."""
    flat = lambda values: values.reshape(-1, values.shape[-1])  # noqa: E731
    affine = fit_affine(flat(window[train]), flat(rep[train]))
    residual = rep - affine.predict(flat(window)).reshape(rep.shape)

    def readout(fit, apply):
        solver = ridge_solver(flat(residual[fit]))
        weights = solver.weights(flat(y[fit]) - flat(y[fit]).mean(axis=0))
        return (residual[apply] - solver.x_mean) @ weights

    out = np.zeros(y.shape)
    test = np.setdiff1d(np.arange(len(y)), train)
    out[test] = readout(train, test)
    folds = np.arange(len(train)) % n_folds
    for fold in range(n_folds):
        out[train[folds == fold]] = readout(train[folds != fold], train[folds == fold])
    return out


@pytest.mark.parametrize("rank_deficient", [False, True])
def test_the_readout_is_the_one_refitted_per_fold(rank_deficient):
    rng = np.random.default_rng(4)
    episodes, steps = 23, 17
    rep = rng.normal(size=(episodes, steps, 10)) * rng.uniform(0.5, 4.0, size=10)
    if rank_deficient:
        rep -= rep.mean(axis=-1, keepdims=True)
    window = rng.integers(0, 2, size=(episodes, steps, 4)).astype(np.float64)
    y = rng.dirichlet(np.ones(3), size=(episodes, steps))
    train = np.sort(rng.permutation(episodes)[:17])
    solver = ridge_solver(window[train].reshape(-1, 4))
    out, kept = window_residual_readout(rep, window, y, train=train, window_solver=solver)
    alone, _ = window_residual_readout(rep, window, y, train=train)
    np.testing.assert_array_equal(out, alone)  # the shared window factorization: bit for bit
    assert kept == 10
    np.testing.assert_allclose(out, _readout_refitted(rep, window, y, train), atol=1e-12)

"""Probe speed without new numbers (issue 53 item 2): branch labels by one lexsort are
np.unique's row labels exactly; a probe and its two permutation nulls share one
factorization of the train representations and give bit for bit the nulls computed alone."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.analysis import ProbeSettings, evaluate_probe
from rl_harness.analysis.probes import (
    branch_ids,
    conditional_permutation_null,
    fit_affine,
    permutation_null,
    ridge_solver,
    window_features,
)
from rl_harness.seeding import stream_rng


def unique_labels(tokens: np.ndarray, k: int) -> np.ndarray:
    """The labels as np.unique(axis=0) numbers the branch keys (the former computation)."""
    episodes, steps = tokens.shape[:2]
    values = tokens.reshape(episodes, steps, -1).astype(np.float64)
    keys = window_features(values, k).reshape(episodes, steps, k, -1)[:, :, ::-1]
    _, inverse = np.unique(keys.reshape(episodes * steps, -1), axis=0, return_inverse=True)
    return inverse.reshape(episodes, steps)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("shape", [(7, 40), (5, 30, 3)])
def test_branch_labels_are_np_uniques_row_labels(k, shape):
    rng = np.random.default_rng(k)
    tokens = rng.integers(0, 3, size=shape)
    labels = branch_ids(tokens, k)
    np.testing.assert_array_equal(labels, unique_labels(tokens, k))
    assert labels.dtype == np.int64 and labels.min() == 0
    assert labels.max() + 1 == len(np.unique(labels)) > 3**k // 2  # many, numbered densely
    # Float codes (binned actions beside tokens) with ties and negative values.
    codes = np.concatenate(
        [
            tokens[..., None] if tokens.ndim == 2 else tokens,
            rng.choice([-0.5, 0.0, 2.5], size=(*shape[:2], 1)),
        ],
        axis=-1,
    )
    np.testing.assert_array_equal(branch_ids(codes, k), unique_labels(codes, k))


def test_a_probe_and_its_nulls_share_one_factorization_with_the_same_numbers():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 3, size=(12, 50))
    beliefs = rng.dirichlet(np.ones(3), size=(12, 50))
    x = np.concatenate([beliefs @ rng.normal(size=(3, 6)), rng.normal(size=(12, 50, 4))], -1)
    settings = ProbeSettings(
        seed=3,
        ridge=1e-6,
        test_fraction=0.25,
        n_bootstrap=50,
        branch_depth=2,
        n_permutations=20,
        n_within_permutations=20,
    )
    evaluation = evaluate_probe(x, beliefs, settings, branch_tokens=tokens)
    train, test = evaluation.train_episodes, evaluation.test_episodes
    stream = evaluation.settings.stream
    alone = permutation_null(
        x[train],
        beliefs[train],
        x[test],
        beliefs[test],
        observed=evaluation.report.permutation.observed,
        ridge=1e-6,
        n_permutations=20,
        rng=stream_rng(3, *stream, "permutation"),
    )
    assert evaluation.report.permutation.null_r2_pooled == alone.null_r2_pooled
    labels = branch_ids(tokens, 2)
    within = conditional_permutation_null(
        x[train],
        beliefs[train],
        x[test],
        beliefs[test],
        labels[train],
        labels[test],
        ridge=1e-6,
        n_permutations=20,
        rng=stream_rng(3, *stream, "within_permutation"),
    )
    assert evaluation.report.within_branch.permutation.null_r2_pooled == within.null_r2_pooled
    assert evaluation.report.within_branch.permutation.observed == within.observed
    # The probe itself: the fit alone gives the same weights.
    flat = x[train].reshape(-1, x.shape[2])
    fitted = fit_affine(flat, beliefs[train].reshape(-1, 3), 1e-6)
    np.testing.assert_array_equal(evaluation.probe.weights, fitted.weights)
    # A factorization of other representations, or at another ridge, is refused.
    with pytest.raises(ValueError, match="another shape"):
        fit_affine(
            flat[:-1], beliefs[train].reshape(-1, 3)[:-1], 1e-6, solver=ridge_solver(flat, 1e-6)
        )
    with pytest.raises(ValueError, match="ridge"):
        fit_affine(flat, beliefs[train].reshape(-1, 3), 0.1, solver=ridge_solver(flat, 1e-6))

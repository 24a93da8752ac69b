"""The random-feature baseline's two stated properties, each tested itself (issue 49, "Also";
`yardstick.random_relu_features`, what `random_feature_probe` reads):

- the inputs are standardized by the fit (train) episodes' steps only: the features of the
  fit episodes do not depend on the held-out inputs at all;
- ReLU(z W + c) with z standardized, W ~ N(0, 1 / n_inputs) and c ~ N(0, 1): the
  pre-activation z W has unit variance on the fit steps, and so does c.

Known answer used: for a pre-activation a whose law is symmetric about 0 (here (W, c) and
(-W, -c) are equally likely), E[ReLU(a)^2] = E[a^2] / 2. On the fit steps z has mean 0, so
E[a^2] = E[(z W)^2] + E[c^2] = 1 + 1, and the mean of the squared features is 1; at a step
whose input is the fit mean (z = 0) the feature is ReLU(c), whose mean square is 1/2.
"""

from __future__ import annotations

import numpy as np

from rl_harness.analysis.yardstick import random_relu_features

N_INPUTS = 16
TRAIN = np.arange(14)  # the fit episodes; 14..19 are held out


def _inputs(seed: int = 0) -> np.ndarray:
    """(20 episodes, 10 steps, 16) inputs far from standard: means 5, scales 0.5 to 3."""
    rng = np.random.default_rng(seed)
    scales = np.linspace(0.5, 3.0, N_INPUTS)
    return 5.0 + scales * rng.normal(size=(20, 10, N_INPUTS))


def test_fit_episodes_features_ignore_the_held_out_inputs():
    x = _inputs()
    shifted = x.copy()
    shifted[14:] = 100.0 * x[14:] + 50.0  # held-out inputs on another scale entirely
    a = random_relu_features(x, TRAIN, 64, np.random.default_rng(7))
    b = random_relu_features(shifted, TRAIN, 64, np.random.default_rng(7))
    np.testing.assert_array_equal(a[TRAIN], b[TRAIN])
    assert not np.allclose(a[14:], b[14:])  # the held-out features do see their inputs


def test_pre_activations_have_unit_variance_on_the_fit_steps():
    x = _inputs(1)
    x[19, 0] = x[TRAIN].reshape(-1, N_INPUTS).mean(axis=0)  # a held-out step at z = 0
    width = 20_000  # mean squares over this many units: standard errors ~0.01
    features = random_relu_features(x, TRAIN, width, np.random.default_rng(3))
    fit_mean_square = float((features[TRAIN] ** 2).mean())
    bias_mean_square = float((features[19, 0] ** 2).mean())
    assert abs(bias_mean_square - 0.5) < 0.04  # c ~ N(0, 1)
    # E[(z W)^2] = 2 * fit_mean_square - E[c^2]: 1 for W ~ N(0, 1 / n_inputs); a weight
    # scale of 1 / n_inputs (a variance of 1 / n_inputs^2) would give ~0.004, of 1 gives 16.
    assert abs(fit_mean_square - 1.0) < 0.06
    assert abs((2 * fit_mean_square - 2 * bias_mean_square) - 1.0) < 0.15

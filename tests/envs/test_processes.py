"""Z1R, RRXOR and product HMMs: exact values worked out by hand, and brute-force references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rl_harness.envs.hmm import (
    HMMModel,
    filter_beliefs,
    is_unifilar,
    next_token_probabilities,
    product_hmm,
    rrxor_model,
    unifilar_entropy_rate,
    update,
    zero_one_random_model,
)
from rl_harness.envs.mess3 import mess3_model
from tests.envs.helpers import mess3_config, path_posterior, word_probabilities

THIRD = 1.0 / 3.0


def test_z1r_stationary_law_and_entropy_rates():
    z1r = zero_one_random_model()
    np.testing.assert_allclose(z1r.initial, [THIRD] * 3, atol=1e-15)
    np.testing.assert_allclose(z1r.stationary_distribution(), [THIRD] * 3, atol=1e-15)
    # The chain A -> B -> R -> A is deterministic, the tokens are not.
    np.testing.assert_array_equal(z1r.transition_matrix, [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    assert z1r.state_entropy_rate() == 0.0
    assert is_unifilar(z1r)
    assert unifilar_entropy_rate(z1r) == pytest.approx(1 / 3, abs=1e-15)
    # The library's sampled estimator agrees (standard error about 1e-3 bits).
    assert z1r.entropy_rate(n_sequences=128, n_steps=1024, burn_in=16) == pytest.approx(
        1 / 3, abs=0.01
    )


def test_z1r_belief_updates_by_hand():
    z1r = zero_one_random_model()
    uniform = np.full(3, THIRD)
    np.testing.assert_allclose(next_token_probabilities(z1r, uniform), [0.5, 0.5])
    # Token 0 leaves A (weight 1/3, to B) or R (weight 1/6, to A): belief (1/3, 2/3, 0).
    np.testing.assert_allclose(update(z1r, uniform, 0), [THIRD, 2 * THIRD, 0.0])
    # Token 1 leaves B (weight 1/3, to R) or R (1/6, to A): belief (1/3, 0, 2/3).
    np.testing.assert_allclose(update(z1r, uniform, 1), [THIRD, 0.0, 2 * THIRD])
    words = [[0, 1], [1, 1], [0, 0], [1, 0], [1, 0, 1], [1, 0, 0]]
    expected = [[0, 0, 1], [1, 0, 0], [0, 1, 0], [0.5, 0.5, 0], [0, 0, 1], [0, 1, 0]]
    for word, belief in zip(words, expected, strict=True):
        np.testing.assert_allclose(filter_beliefs(z1r, word)[-1], belief, atol=1e-15)
        np.testing.assert_allclose(path_posterior(z1r, tuple(word)), belief, atol=1e-15)


def test_z1r_prefix_probabilities_by_hand():
    z1r = zero_one_random_model()
    by_word = {tuple(w): p for w, p, _ in zip(*word_probabilities(z1r, 2), strict=True)}
    assert by_word == pytest.approx({(0, 0): 1 / 6, (0, 1): 1 / 3, (1, 0): 1 / 3, (1, 1): 1 / 6})
    # Length 3: each phase gives two words (01r, 1r0, r01), each with probability 1/6.
    words, probabilities, _ = word_probabilities(z1r, 3)
    by_word = {tuple(w): p for w, p in zip(words.tolist(), probabilities, strict=True)}
    possible = {(0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1)}
    assert by_word == pytest.approx({w: 1 / 6 if w in possible else 0.0 for w in by_word})


def test_z1r_samples_walk_the_cycle():
    sample = zero_one_random_model().sample(300, np.random.default_rng(0), initial_state=0)
    np.testing.assert_array_equal(sample.states, np.arange(301) % 3)
    np.testing.assert_array_equal(sample.tokens[0::3], 0)  # out of A
    np.testing.assert_array_equal(sample.tokens[1::3], 1)  # out of B
    assert 0.3 < sample.tokens[2::3].mean() < 0.7  # out of R: fair


def test_rrxor_stationary_law_entropy_rate_and_samples():
    rrxor = rrxor_model()
    expected = [THIRD, 1 / 6, 1 / 6, 1 / 6, 1 / 6]
    np.testing.assert_allclose(rrxor.initial, expected, atol=1e-15)
    np.testing.assert_allclose(rrxor.stationary_distribution(), expected, atol=1e-15)
    assert is_unifilar(rrxor)
    assert unifilar_entropy_rate(rrxor) == pytest.approx(2 / 3, abs=1e-15)
    sample = rrxor.sample(3000, np.random.default_rng(1), initial_state=0)
    blocks = sample.tokens.reshape(-1, 3)
    np.testing.assert_array_equal(blocks[:, 2], blocks[:, 0] ^ blocks[:, 1])
    np.testing.assert_array_equal(sample.states[0::3], 0)  # every block starts in S
    assert 0.45 < blocks[:, :2].mean() < 0.55


def test_non_unifilar_model_has_no_closed_form_rate():
    mess3 = mess3_model(0.05, 0.85)
    assert not is_unifilar(mess3)
    with pytest.raises(ValueError, match="not unifilar"):
        unifilar_entropy_rate(mess3)


def test_product_token_matrices_indices_and_initial():
    z1r, mess3 = zero_one_random_model(), mess3_model(0.05, 0.85)
    product = product_hmm(z1r, mess3)
    model = product.model
    assert isinstance(model, HMMModel) and model.name == f"zero_one_random x {mess3.name}"
    assert (model.n_tokens, model.n_states) == (6, 9)
    assert product.token_shape == (2, 3) and product.state_shape == (3, 3)
    for k1, k2, i1, i2, j1, j2 in itertools.product(range(2), range(3), *[range(3)] * 4):
        assert model.token_matrices[3 * k1 + k2, 3 * i1 + i2, 3 * j1 + j2] == pytest.approx(
            z1r.token_matrices[k1, i1, j1] * mess3.token_matrices[k2, i2, j2], abs=1e-15
        )
    np.testing.assert_allclose(model.initial, np.full(9, 1 / 9))
    tokens = np.arange(6).reshape(2, 3)
    pairs = product.factor_tokens(tokens)
    np.testing.assert_array_equal(pairs[1, 0], [1, 0])  # joint 3 = (z1r 1, mess3 0)
    np.testing.assert_array_equal(product.joint_tokens(pairs), tokens)
    with pytest.raises(ValueError, match="at least one"):
        product_hmm()


def test_product_belief_is_the_product_of_factor_beliefs_against_brute_force():
    z1r, mess3 = zero_one_random_model(), mess3_model(0.05, 0.85)
    product = product_hmm(z1r, mess3)
    sample = product.model.sample(4, np.random.default_rng(3), n_sequences=3)
    joint = filter_beliefs(product.model, sample.tokens)  # (3, 5, 9)
    per_factor = product.factor_tokens(sample.tokens)  # (3, 4, 2)
    factor_beliefs = [
        filter_beliefs(factor, per_factor[..., f]) for f, factor in enumerate(product.factors)
    ]
    np.testing.assert_allclose(joint, product.joint_belief(factor_beliefs), atol=1e-12)
    for marginal, expected in zip(product.factor_beliefs(joint), factor_beliefs, strict=True):
        np.testing.assert_allclose(marginal, expected, atol=1e-12)
    for word, belief in zip(sample.tokens, joint, strict=True):  # sum over all 9**5 paths
        np.testing.assert_allclose(path_posterior(product.model, tuple(word)), belief[-1])


def test_product_of_periodic_factors_keeps_the_product_law_and_adds_entropy_rates():
    z1r, rrxor = zero_one_random_model(), rrxor_model()
    # Two period-3 chains: the product chain has several stationary laws; the product of
    # the factors' laws is the one it starts from.
    product = product_hmm(z1r, rrxor).model
    with pytest.raises(ValueError, match="several stationary"):
        product.stationary_distribution()
    np.testing.assert_allclose(product.initial, np.kron(z1r.initial, rrxor.initial))
    assert is_unifilar(product)
    assert unifilar_entropy_rate(product) == pytest.approx(1 / 3 + 2 / 3, abs=1e-14)
    three = product_hmm(z1r, z1r, z1r, name="z1r^3")
    assert three.model.name == "z1r^3" and three.model.n_states == 27
    beliefs = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 3))
    joint = three.joint_belief([beliefs[:, 0], beliefs[:, 1], beliefs[:, 2]])
    assert joint.shape == (2, 27)
    np.testing.assert_allclose(np.stack(three.factor_beliefs(joint), axis=1), beliefs)


@pytest.mark.parametrize("factory", ["zero_one_random_model", "rrxor_model"])
def test_named_processes_run_as_env_model_factories(factory):
    from rl_harness.envs.hmm import HMMEnv

    config = mess3_config(
        model=f"rl_harness.envs.hmm.processes:{factory}", model_kwargs={}, info=["token", "belief"]
    )
    env = HMMEnv(config)
    _, info = env.reset(seed=0)
    tokens, beliefs = [], [info["belief"]]
    for _ in range(12):
        _, _, _, _, info = env.step(env.action_space.sample())
        tokens.append(info["token"])
        beliefs.append(info["belief"])
    reference = zero_one_random_model() if factory.startswith("zero") else rrxor_model()
    np.testing.assert_array_equal(env.model.token_matrices, reference.token_matrices)
    np.testing.assert_allclose(beliefs, filter_beliefs(reference, tokens), atol=1e-12)

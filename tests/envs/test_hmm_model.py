"""HMMModel: validation, stationary distribution, entropy rates, sampling."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import HMMModel
from rl_harness.envs.mess3 import PAPER_ALPHA, PAPER_X, control_chain_model, mess3_model
from tests.envs.helpers import conditional_entropy, random_model


def test_token_matrices_and_transition_of_a_model_are_read_only():
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    with pytest.raises(ValueError, match="read-only"):
        model.token_matrices[0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        model.transition_matrix[0, 0] = 1.0
    with pytest.raises(AttributeError):
        model.name = "other"


@pytest.mark.parametrize(
    ("tensor", "message"),
    [
        (np.ones((3, 3)), "shape"),
        (np.ones((2, 3, 4)) / 8, "shape"),
        (-np.ones((1, 2, 2)), "negative"),
        (np.full((1, 2, 2), np.nan), "non-finite"),
        (np.full((2, 2, 2), 0.3), "row 0 sums to 1.2"),
        ([[["a"]]], "numeric"),
    ],
)
def test_bad_token_matrices_raise_clear_errors(tensor, message):
    with pytest.raises(ValueError, match=message):
        HMMModel.from_token_matrices(tensor, np.full(np.shape(tensor)[-1], 0.5))


def test_bad_initial_and_moore_form_raise_clear_errors():
    tensor = np.full((2, 2, 2), 0.25)
    with pytest.raises(ValueError, match="must sum to 1"):
        HMMModel.from_token_matrices(tensor, [0.5, 0.6])
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        HMMModel.from_token_matrices(tensor, [1.0])
    with pytest.raises(ValueError, match="emission matrix rows"):
        HMMModel.from_transition_emission(np.eye(2), [[0.5, 0.6], [1.0, 0.0]])
    with pytest.raises(ValueError, match="square"):
        HMMModel.from_transition_emission(np.ones((2, 3)) / 3, np.eye(2))
    with pytest.raises(ValueError, match="several stationary"):
        HMMModel.from_transition_emission(np.eye(2), np.eye(2))


def test_moore_form_builds_next_and_current_state_emission():
    p = np.array([[0.9, 0.1], [0.3, 0.7]])
    e = np.array([[0.8, 0.2], [0.25, 0.75]])
    nxt = HMMModel.from_transition_emission(p, e, [0.5, 0.5], emitted_by="next")
    cur = HMMModel.from_transition_emission(p, e, [0.5, 0.5], emitted_by="current")
    for k in range(2):
        for i in range(2):
            for j in range(2):
                assert nxt.token_matrices[k, i, j] == pytest.approx(p[i, j] * e[j, k])
                assert cur.token_matrices[k, i, j] == pytest.approx(e[i, k] * p[i, j])
    np.testing.assert_allclose(nxt.transition_matrix, p)


@pytest.mark.parametrize(("x", "alpha"), [(PAPER_X, PAPER_ALPHA), (0.15, 0.6), (0.3, 0.1)])
def test_mess3_stationary_distribution_is_uniform(x, alpha):
    model = mess3_model(x, alpha)
    np.testing.assert_allclose(model.stationary_distribution(), np.full(3, 1 / 3), atol=1e-12)
    np.testing.assert_allclose(model.initial, np.full(3, 1 / 3))


def test_control_chain_stationary_distribution_and_default_initial():
    model = control_chain_model(PAPER_ALPHA)
    expected = np.array([0.45, 0.45, 0.10])
    np.testing.assert_allclose(model.stationary_distribution(), expected, atol=1e-12)
    np.testing.assert_allclose(model.initial, expected, atol=1e-12)
    np.testing.assert_allclose(model.stationary_distribution() @ model.transition_matrix, expected)


def test_state_entropy_rate_matches_the_passive_chain():
    # P = 0.9 on the diagonal, 0.05 off: -(0.9 log2 0.9 + 2 * 0.05 log2 0.05) = 0.569 bits.
    expected = -(0.9 * np.log2(0.9) + 2 * 0.05 * np.log2(0.05))
    assert mess3_model(PAPER_X, PAPER_ALPHA).state_entropy_rate() == pytest.approx(expected)
    assert expected == pytest.approx(0.569, abs=5e-4)


def test_entropy_rate_of_mess3_lies_between_exact_block_bounds():
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    length = 8
    # H(X_L | X_<L) decreases to the entropy rate from above; conditioning on the first
    # state as well gives a bound from below (Cover & Thomas, theorem 4.5.1).
    upper = conditional_entropy(model, length)
    lower = np.mean([conditional_entropy(model, length, np.eye(3)[s]) for s in range(3)])
    assert upper - lower < 1e-4
    estimate = model.entropy_rate()
    assert lower - 2e-3 < estimate < upper + 2e-3
    assert estimate == pytest.approx(1.145, abs=2e-3)
    assert estimate < np.log2(3) - 0.4


def test_entropy_rate_in_closed_form_cases():
    # One state: i.i.d. tokens, the rate is the token entropy.
    emission = np.array([[0.5, 0.25, 0.25]])
    iid = HMMModel.from_transition_emission([[1.0]], emission)
    assert iid.entropy_rate(n_sequences=8, n_steps=64, burn_in=0) == pytest.approx(1.5)
    # Tokens name the state entered: the token process is the state chain (the estimate
    # averages row entropies over sampled states, so only the Monte Carlo error remains).
    chain = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]])
    revealing = HMMModel.from_transition_emission(chain, np.eye(3))
    assert revealing.entropy_rate() == pytest.approx(revealing.state_entropy_rate(), abs=1e-3)


def test_sample_reproduces_under_a_seed_and_follows_the_token_matrices():
    model = random_model(np.random.default_rng(3), n_states=3, n_tokens=2)
    first = model.sample(4000, np.random.default_rng(11), n_sequences=50)
    again = model.sample(4000, np.random.default_rng(11), n_sequences=50)
    np.testing.assert_array_equal(first.tokens, again.tokens)
    assert first.tokens.shape == (50, 4000) and first.states.shape == (50, 4001)
    counts = np.zeros(model.token_matrices.shape)
    np.add.at(counts, (first.tokens, first.states[:, :-1], first.states[:, 1:]), 1)
    visits = counts.sum(axis=(0, 2))
    empirical = counts / visits[None, :, None]
    # 200k moves: each frequency's standard error is below 0.002.
    np.testing.assert_allclose(empirical, model.token_matrices, atol=0.01)
    single = model.sample(5, np.random.default_rng(0), initial_state=2)
    assert single.tokens.shape == (5,) and single.states[0] == 2
    with pytest.raises(ValueError, match="initial_state"):
        model.sample(5, np.random.default_rng(0), initial_state=3)

"""Exact beliefs against brute-force Bayes over enumerated state paths."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rl_harness.envs.hmm import (
    filter_beliefs,
    next_token_probabilities,
    predict,
    update,
)
from rl_harness.envs.mess3 import PAPER_ALPHA, PAPER_X, mess3_model
from tests.envs.helpers import path_posterior, random_model, word_probabilities

MODELS = {
    "mess3": mess3_model(PAPER_X, PAPER_ALPHA),
    "random_4x2": random_model(np.random.default_rng(5), n_states=4, n_tokens=2),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_filtered_beliefs_equal_bayes_over_enumerated_paths(name):
    model = MODELS[name]
    for length in (1, 2, 3, 4):
        words = list(itertools.product(range(model.n_tokens), repeat=length))
        beliefs = filter_beliefs(model, np.array(words))
        assert beliefs.shape == (len(words), length + 1, model.n_states)
        for word, trajectory in zip(words, beliefs, strict=True):
            np.testing.assert_allclose(trajectory[-1], path_posterior(model, word), atol=1e-12)
            np.testing.assert_allclose(trajectory[0], model.initial)


def test_update_steps_match_filtering_and_measure_is_the_same_step():
    model = MODELS["random_4x2"]
    tokens = model.sample(30, np.random.default_rng(1), n_sequences=6).tokens
    beliefs = filter_beliefs(model, tokens)
    belief = np.tile(model.initial, (6, 1))
    for t in range(30):
        belief = update(model, belief, tokens[:, t])
        np.testing.assert_allclose(belief, beliefs[:, t + 1], atol=1e-12)
    np.testing.assert_allclose(filter_beliefs(model, tokens[0]), beliefs[0])


def test_next_token_probabilities_and_predict_match_enumeration():
    model = MODELS["mess3"]
    words, probability, belief = word_probabilities(model, 3)
    longer_words, longer_probability, _ = word_probabilities(model, 4)
    predicted = next_token_probabilities(model, belief)  # P(x4 | x1..x3)
    joint = longer_probability.reshape(len(words), model.n_tokens)  # P(x1..x3, x4)
    np.testing.assert_allclose(predicted * probability[:, None], joint, atol=1e-14)
    np.testing.assert_allclose(predicted.sum(axis=1), 1.0)
    # predict: the next state's distribution without a token is the token-averaged update.
    averaged = sum(
        predicted[:, [k]] * update(model, belief, np.full(len(words), k))
        for k in range(model.n_tokens)
    )
    np.testing.assert_allclose(predict(model, belief), averaged, atol=1e-12)


def test_bad_tokens_and_impossible_sequences_raise():
    model = MODELS["mess3"]
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 3\)"):
        filter_beliefs(model, np.array([[0, 3]]))
    with pytest.raises(ValueError, match="integers"):
        filter_beliefs(model, np.array([[0.5]]))
    with pytest.raises(ValueError, match="initial must be a distribution"):
        filter_beliefs(model, np.array([[0]]), initial=np.array([1.0, 1.0, 0.0]))
    certain = mess3_model(0.0, 1.0)  # state never changes and always shows itself
    with pytest.raises(ValueError, match="sequence 1 has probability zero at token 1"):
        filter_beliefs(certain, np.array([[0, 0], [0, 1]]))

"""The filter that sees only the last m steps (`window_beliefs`, the memory yardstick's
beliefs): exact when the window covers the whole sequence, exact at m = 1 for a process whose
belief depends only on the newest token, the same as filtering the last m tokens alone, and
for a controlled process the env's own decision belief when the window reaches the reset."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import (
    HMMModel,
    HMMVectorEnv,
    filter_beliefs,
    sampled_beliefs,
    window_beliefs,
)
from rl_harness.envs.mess3 import PAPER_ALPHA, PAPER_X, mess3_model
from rl_harness.envs.mess3.control import tilted_transitions


def test_a_window_as_long_as_the_sequence_is_the_exact_filter():
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    tokens, beliefs = sampled_beliefs(model, 5, 40, np.random.default_rng(0))
    matrices = model.token_matrices[tokens]
    for m in (40, 100):
        np.testing.assert_allclose(
            window_beliefs(matrices, model.initial, m), beliefs[:, 1:], atol=1e-12
        )
    # A short window is not (MESS3's belief keeps memory of older tokens).
    assert np.abs(window_beliefs(matrices, model.initial, 2) - beliefs[:, 1:]).max() > 0.1


def test_window_m_is_the_filter_of_the_last_m_tokens_alone():
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    tokens, _ = sampled_beliefs(model, 4, 30, np.random.default_rng(1))
    matrices = model.token_matrices[tokens]
    for m in (1, 3, 6):
        got = window_beliefs(matrices, model.initial, m)
        for t in (m - 1, 12, 29):
            alone = filter_beliefs(model, tokens[:, t - m + 1 : t + 1])[:, -1]
            np.testing.assert_allclose(got[:, t], alone, atol=1e-12)
        # Before m tokens exist the filter starts at the first one.
        np.testing.assert_allclose(got[:, 0], filter_beliefs(model, tokens[:, :1])[:, -1])


def test_m_1_is_exact_when_the_newest_token_fixes_the_belief():
    # Each state emits its own label, so after any token the state is known exactly.
    transition = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
    model = HMMModel.from_transition_emission(transition, np.eye(3), emitted_by="next")
    tokens, beliefs = sampled_beliefs(model, 6, 50, np.random.default_rng(2))
    got = window_beliefs(model.token_matrices[tokens], model.initial, 1)
    np.testing.assert_allclose(got, beliefs[:, 1:], atol=1e-12)
    np.testing.assert_allclose(got, np.eye(3)[tokens], atol=1e-12)


def test_controlled_decision_belief_from_tokens_and_executed_actions():
    """The occupancy-control env at delay 1: measure the newest visible token, then move
    through the executed tilt; a window back to the reset gives info['decision_belief']."""
    config = {
        "model": "rl_harness.envs.mess3:control_chain_model",
        "model_kwargs": {"alpha": 0.85},
        "task": "rl_harness.envs.mess3.tasks:OccupancyControlTask",
        "task_kwargs": {"w_max": 5.0, "beta": 4.0, "occupancy_states": [2]},
        "observation_delay": 1,
        "episode_length": 64,
        "token_window": 1,
        "action_window": 1,
        "info": ["decision_belief"],
    }
    env = HMMVectorEnv(3, config)
    layout = env.layout
    rng = np.random.default_rng(3)
    obs, info = env.reset(seed=[1, 2, 3])
    observations, targets = [obs], [info["decision_belief"]]
    for _ in range(30):
        obs, _, _, _, info = env.step(rng.uniform(-6, 6, size=(3, 2)))
        observations.append(obs)
        targets.append(info["decision_belief"])
    observations, targets = np.stack(observations, 1), np.stack(targets, 1)
    emission = np.full((3, 3), 0.075) + 0.775 * np.eye(3)  # MESS3 emissions, alpha 0.85
    tokens = observations[..., layout.tokens].astype(np.float64)
    likelihood = tokens @ emission.T + (1.0 - tokens.sum(-1, keepdims=True))  # none: 1
    actions = -5.0 + 10.0 * observations[..., layout.actions].astype(np.float64)
    base = env.model.transition_matrix
    matrices = likelihood[..., :, None] * tilted_transitions(base, actions)
    matrices[:, 0] = np.eye(3)  # the reset step carries no token and no action
    got = window_beliefs(matrices, env.model.initial, 31)
    np.testing.assert_allclose(got, targets, atol=1e-5)  # float32 observations
    short = window_beliefs(matrices, env.model.initial, 2)
    assert np.abs(short - targets)[:, 5:].max() > 1e-3
    env.close()


@pytest.mark.parametrize(
    ("matrices", "prior", "m", "message"),
    [
        (np.ones((4, 3, 3)), np.ones(3) / 3, 0, "window m"),
        (np.ones((4, 3, 2)), np.ones(3) / 3, 1, "step_matrices"),
        (np.ones((4, 3, 3)), np.ones(2) / 2, 1, "prior"),
        (np.zeros((4, 3, 3)), np.ones(3) / 3, 1, "probability zero"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(matrices, prior, m, message):
    with pytest.raises(ValueError, match=message):
        window_beliefs(matrices, prior, m)

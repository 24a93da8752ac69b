"""HMMEnv: observations, info diagnostics, named seed streams, episodes, errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rl_harness.envs.hmm import HMMEnv, filter_beliefs
from rl_harness.envs.mess3 import PAPER_ALPHA, PAPER_X, mess3_model
from rl_harness.seeding import stream_rng
from tests.envs.helpers import ALL_INFO, mess3_config

MODEL = mess3_model(PAPER_X, PAPER_ALPHA)


class BoxActionTask:
    reward_components = ()

    def __init__(self, model):
        self.action_space = gym.spaces.Box(0.0, 1.0, (2,))


class IncompleteTask:
    def __init__(self, model):
        self.action_space = gym.spaces.Discrete(2)


def rollout(env: HMMEnv, seed: int, actions: list[int]):
    obs, info = env.reset(seed=seed)
    steps = [(obs, 0.0, False, False, info)]
    for action in actions:
        steps.append(env.step(action))
    return steps


def test_env_passes_the_gymnasium_checker():
    env = HMMEnv(mess3_config(include_belief=True, action_window=2, info=ALL_INFO))
    check_env(env, skip_render_check=True)


def test_process_follows_the_named_state_and_emission_streams():
    # Reference: the hidden chain is driven by stream "state" (first draw: the initial
    # state), tokens by stream "emission" (whose first draw the reset consumes).
    seed, n_steps = 123, 1100  # more steps than one pre-drawn block of uniforms
    env = HMMEnv(mess3_config(info=ALL_INFO, episode_length=5000))
    steps = rollout(env, seed, [0] * n_steps)
    u_state = stream_rng(seed, "state").random(n_steps + 1)
    u_emission = stream_rng(seed, "emission").random(n_steps + 1)

    def draw(probabilities: np.ndarray, u: float) -> int:
        return int((u >= np.cumsum(probabilities)[:-1]).sum())

    p, tensor = MODEL.transition_matrix, MODEL.token_matrices
    state = draw(MODEL.initial, u_state[0])
    assert steps[0][4]["state"] == state
    for t in range(1, n_steps + 1):
        nxt = draw(p[state], u_state[t])
        token = draw(tensor[:, state, nxt] / p[state, nxt], u_emission[t])
        info = steps[t][4]
        assert (info["state_before"], info["token"], info["state"]) == (state, token, nxt)
        state = nxt


def test_seed_reproduces_and_actions_do_not_move_an_uncontrolled_process():
    env = HMMEnv(mess3_config(info=ALL_INFO))
    actions = list(np.random.default_rng(0).integers(0, 3, 50))
    first = rollout(env, 7, actions)
    again = rollout(env, 7, actions)
    other_actions = rollout(env, 7, [0] * 50)
    other_seed = rollout(env, 8, actions)
    for a, b, c in zip(first, again, other_actions, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
        assert a[4]["token"] == c[4]["token"] and a[4]["state"] == c[4]["state"]
    tokens = [s[4]["token"] for s in first[1:]]
    assert tokens != [s[4]["token"] for s in other_seed[1:]]


def test_info_belief_is_exact_filtering_and_obs_shows_newest_token_first():
    env = HMMEnv(
        mess3_config(token_window=4, include_belief=True, include_state=True, info=ALL_INFO)
    )
    steps = rollout(env, 3, [1] * 40)
    tokens = np.array([s[4]["token"] for s in steps[1:]])
    exact = filter_beliefs(env.model, tokens[None])[0]
    layout = env.layout
    for t, (obs, reward, _, _, info) in enumerate(steps):
        np.testing.assert_allclose(info["belief"], exact[t], atol=1e-12)
        assert info["belief"].dtype == np.float64
        np.testing.assert_allclose(obs[layout.belief], exact[t], atol=1e-6)
        assert obs[layout.state].argmax() == info["state"] and obs[layout.state].sum() == 1
        window = obs[layout.tokens].reshape(4, 3)
        for slot in range(4):
            if t - slot >= 1:
                assert window[slot].argmax() == tokens[t - 1 - slot] and window[slot].sum() == 1
            else:
                assert window[slot].sum() == 0
        if t:
            assert reward == float(info["token"] == 1) == info["reward_components"]["correct"]
    assert steps[0][4]["token"] == -1 and steps[0][4]["state_before"] == -1


def test_observation_delay_lags_tokens_and_belief_and_action_window_is_newest_first():
    delay = 2
    env = HMMEnv(
        mess3_config(
            token_window=3,
            action_window=2,
            include_belief=True,
            observation_delay=delay,
            info=ALL_INFO,
        )
    )
    actions = [0, 2, 1, 1, 0, 2, 2, 1]
    steps = rollout(env, 5, actions)
    tokens = [s[4]["token"] for s in steps]
    beliefs = [s[4]["belief"] for s in steps]
    layout = env.layout
    for t, (obs, *_rest) in enumerate(steps):
        window = obs[layout.tokens].reshape(3, 3)
        for slot in range(3):
            source = t - delay - slot  # index into steps of the token shown in this slot
            if source >= 1:
                assert window[slot].argmax() == tokens[source]
            else:
                assert window[slot].sum() == 0
        np.testing.assert_allclose(obs[layout.belief], beliefs[max(t - delay, 0)], atol=1e-6)
        shown = obs[layout.actions].reshape(2, 3)
        for slot in range(2):
            if t - 1 - slot >= 0:
                assert shown[slot].argmax() == actions[t - 1 - slot]
            else:
                assert shown[slot].sum() == 0


def test_current_state_task_rewards_the_state_before_the_move():
    env = HMMEnv(mess3_config(task="rl_harness.envs.mess3.tasks:CurrentStateTask", info=ALL_INFO))
    state = env.reset(seed=0)[1]["state"]
    for action in [0, 1, 2] * 10:
        _, reward, _, _, info = env.step(action)
        assert info["state_before"] == state
        assert reward == float(action == state)
        state = info["state"]


def test_episodes_truncate_at_the_length_and_first_length_can_be_randomized():
    env = HMMEnv(mess3_config(episode_length=6))
    env.reset(seed=1)
    flags = [env.step(0)[3] for _ in range(6)]
    assert flags == [False] * 5 + [True]
    with pytest.raises(RuntimeError, match="episode has ended"):
        env.step(0)

    random_first = HMMEnv(mess3_config(episode_length=6, random_first_episode_length=True))
    lengths = []
    for seed in range(30):
        random_first.reset(seed=seed)
        length = 1
        while not random_first.step(0)[3]:
            length += 1
        assert length == stream_rng(seed, "episode_length").integers(1, 7)
        lengths.append(length)
        random_first.reset()  # later episodes have the full length
        assert [random_first.step(0)[3] for _ in range(6)] == [False] * 5 + [True]
    assert min(lengths) >= 1 and max(lengths) <= 6 and len(set(lengths)) > 3


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"windw": 3}, ValueError, "unknown env_config keys"),
        ({"model_kwargs": {"x": np.float32(0.1), "alpha": 0.5}}, ValueError, "JSON"),
        ({"model": "rl_harness.envs.mess3"}, ValueError, "package.module:attr"),
        ({"model": "rl_harness.nowhere:mess3_model"}, ValueError, "cannot import"),
        ({"model": "rl_harness.envs.mess3:nothing"}, ValueError, "no attribute 'nothing'"),
        (
            {"model": "rl_harness.envs.mess3:mess3_emission", "model_kwargs": {"alpha": 0.5}},
            TypeError,
            "returned ndarray, not an HMMModel",
        ),
        ({"model_kwargs": {"x": 0.7, "alpha": 0.5}}, ValueError, r"x must lie in \[0, 0.5\]"),
        ({"model_kwargs": {"x": 0.1}}, TypeError, "mess3_model.*missing.*'alpha'"),
        ({"task_kwargs": {"bonus": 1}}, TypeError, "NextTokenTask.*unexpected.*'bonus'"),
        ({"task": "tests.envs.test_env:BoxActionTask"}, TypeError, "Discrete action space"),
        ({"task": "tests.envs.test_env:IncompleteTask"}, TypeError, "lacks part of the Task"),
        ({"token_window": -1}, ValueError, "'token_window' must be an int >= 0"),
        ({"episode_length": 0}, ValueError, "'episode_length' must be an int >= 1"),
        ({"token_window": 0}, ValueError, "observation would be empty"),
        ({"info": ["belief", "secret"]}, ValueError, r"unknown info keys \['secret'\]"),
        ({"include_belief": 1}, ValueError, "'include_belief' must be a bool"),
    ],
)
def test_bad_configs_raise_clear_errors(overrides, error, message):
    with pytest.raises(error, match=message):
        HMMEnv(mess3_config(**overrides))


def test_missing_keys_and_explicit_models():
    with pytest.raises(ValueError, match=r"missing \['task'\]"):
        HMMEnv({"model": "rl_harness.envs.mess3:mess3_model"})
    explicit = {"token_matrices": MODEL.token_matrices.tolist(), "name": "explicit"}
    env = HMMEnv(mess3_config(model=explicit, model_kwargs={}))
    np.testing.assert_allclose(env.model.token_matrices, MODEL.token_matrices)
    with pytest.raises(ValueError, match="explicit model mapping needs 'token_matrices'"):
        HMMEnv(mess3_config(model={"matrices": []}, model_kwargs={}))
    # Keyword form (what gymnasium.make passes) builds the same env.
    assert HMMEnv(**mess3_config()).config == HMMEnv(mess3_config()).config


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (3, r"action 3 is outside the action space Discrete\(3\)"),
        (-1, "action -1"),
        (1.0, "must be integers"),
        ([0, 1], r"shape \(1,\)"),
    ],
)
def test_bad_actions_raise_clear_errors(action, message):
    env = HMMEnv(mess3_config())
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(action)


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError, match="reset"):
        HMMEnv(mess3_config()).step(0)

"""Continuous actions: the task contract, OccupancyControlTask, delay-aware beliefs."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import SyncVectorEnv

from rl_harness.envs.hmm import HMMEnv, HMMVectorEnv
from rl_harness.envs.hmm.task import Control
from rl_harness.envs.mess3 import (
    CONTROL_CHAIN_TRANSITION,
    OccupancyControlTask,
    control_chain_model,
    mess3_emission,
)
from rl_harness.seeding import stream_rng


def assert_close_info(batched: dict, reference: dict) -> None:
    """Integers exactly; floats to 1e-12 (SIMD exp/log may round the last bit differently
    for different batch lengths)."""
    assert batched.keys() == reference.keys()
    for key, value in reference.items():
        if isinstance(value, dict):
            assert_close_info(batched[key], value)
        elif np.asarray(value).dtype.kind == "f":
            np.testing.assert_allclose(batched[key], value, rtol=0, atol=1e-12, err_msg=key)
        else:
            np.testing.assert_array_equal(batched[key], value, err_msg=key)


ALPHA = 0.85
TASK = "rl_harness.envs.mess3.tasks:OccupancyControlTask"
EVERYTHING = [
    "token",
    "state_before",
    "state",
    "belief",
    "decision_belief",
    "action",
    "transition_matrix",
    "reward_components",
]


def occupancy_config(**overrides) -> dict:
    config = {
        "model": "rl_harness.envs.mess3:control_chain_model",
        "model_kwargs": {"alpha": ALPHA},
        "task": TASK,
        "task_kwargs": {"w_max": 5.0, "beta": 4.0},
        "info": EVERYTHING,
    }
    config.update(overrides)
    return config


def test_continuous_env_passes_the_gymnasium_checker():
    env = HMMEnv(occupancy_config(action_window=2, include_belief=True, observation_delay=1))
    check_env(env, skip_render_check=True)


def direct_tilt(action) -> np.ndarray:
    """U_a written out element by element from the design formula."""
    theta = [0.0, float(action[0]), float(action[1])]
    u = np.empty((3, 3))
    for i in range(3):
        weights = [CONTROL_CHAIN_TRANSITION[i, j] * np.exp(theta[(j - i) % 3]) for j in range(3)]
        u[i] = np.array(weights) / sum(weights)
    return u


def test_tilt_kl_and_reward_components_follow_the_design_formulas():
    env = HMMEnv(occupancy_config(task_kwargs={"w_max": 5.0, "beta": 4.0, "action_cost": 0.1}))
    env.reset(seed=0)
    rng = np.random.default_rng(1)
    for _ in range(60):
        action = rng.uniform(-7, 7, 2)
        _, reward, _, _, info = env.step(action)
        executed = np.clip(action, -5, 5)
        np.testing.assert_array_equal(info["action"], executed)
        u = direct_tilt(executed)
        np.testing.assert_allclose(info["transition_matrix"], u, atol=1e-14)
        s = info["state_before"]
        kl = sum(u[s, j] * np.log(u[s, j] / CONTROL_CHAIN_TRANSITION[s, j]) for j in range(3))
        parts = info["reward_components"]
        assert parts["occupancy"] == float(s == 2)
        assert parts["transition_kl"] == pytest.approx(kl, abs=1e-13)
        assert parts["kl_penalty"] == pytest.approx(kl / 4.0, abs=1e-13)
        assert parts["action_penalty"] == pytest.approx(0.1 * np.hypot(*executed), abs=1e-13)
        assert reward == pytest.approx(float(s == 2) - kl / 4 - 0.1 * np.hypot(*executed))
    # No beta: no KL penalty, but the KL is still reported.
    free = HMMEnv(occupancy_config(task_kwargs={"w_max": 2.0, "occupancy_states": [0, 1]}))
    free.reset(seed=0)
    _, reward, _, _, info = free.step(np.array([2.0, -2.0]))
    assert info["reward_components"]["kl_penalty"] == 0.0
    assert info["reward_components"]["transition_kl"] > 0.1
    assert reward == float(info["state_before"] in (0, 1))
    assert free.action_space == gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


def test_next_state_and_token_follow_the_executed_row_and_the_named_streams():
    seed, n_steps = 17, 1100  # crosses the 1024-draw block of pre-drawn uniforms
    env = HMMEnv(occupancy_config(episode_length=5000))
    info = env.reset(seed=seed)[1]
    u_state = stream_rng(seed, "state").random(n_steps + 1)
    u_emission = stream_rng(seed, "emission").random(n_steps + 1)
    emission = mess3_emission(ALPHA)

    def draw(probabilities, u) -> int:
        return int((u >= np.cumsum(probabilities)[:-1]).sum())

    state = draw(control_chain_model(ALPHA).initial, u_state[0])
    assert info["state"] == state
    rng = np.random.default_rng(2)
    for t in range(1, n_steps + 1):
        action = rng.uniform(-5, 5, 2)
        info = env.step(action)[4]
        nxt = draw(direct_tilt(action)[state], u_state[t])
        token = draw(emission[nxt], u_emission[t])
        assert (info["state_before"], info["state"], info["token"]) == (state, nxt, token)
        state = nxt


def test_a_constant_action_occupies_the_stationary_law_of_its_tilted_chain():
    env = HMMVectorEnv(64, occupancy_config(info=["state"], episode_length=400))
    for action in [(0.0, 0.0), (5.0, 0.0), (-3.0, 4.0)]:
        u = direct_tilt(action)
        eigenvalues, vectors = np.linalg.eig(u.T)
        stationary = np.real(vectors[:, np.argmin(abs(eigenvalues - 1))])
        stationary /= stationary.sum()
        env.reset(seed=0)
        counts = np.zeros(3)
        for t in range(400):
            state = env.step(np.tile(action, (64, 1)))[4]["state"]
            if t >= 50:
                counts += np.bincount(state, minlength=3)
        # 64 x 350 correlated visits: the standard error is below 0.01.
        np.testing.assert_allclose(counts / counts.sum(), stationary, atol=0.03)


def test_vector_env_matches_single_envs_with_continuous_actions_across_autoresets():
    config = occupancy_config(
        episode_length=7,
        random_first_episode_length=True,
        token_window=3,
        action_window=2,
        include_belief=True,
        include_state=True,
        observation_delay=2,
    )
    n = 4
    vector = HMMVectorEnv(n, config)
    reference = SyncVectorEnv([lambda: HMMEnv(config) for _ in range(n)])
    obs, info = vector.reset(seed=3)
    ref_obs, ref_info = reference.reset(seed=3)
    np.testing.assert_array_equal(obs, ref_obs)
    assert_close_info(info, ref_info)
    rng = np.random.default_rng(0)
    for _ in range(60):
        actions = rng.uniform(-6, 6, (n, 2))
        got, want = vector.step(actions), reference.step(actions)
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)
        np.testing.assert_array_equal(got[2], want[2])
        np.testing.assert_array_equal(got[3], want[3])
        assert_close_info(got[4], want[4])
    assert vector.single_action_space == gym.spaces.Box(-5.0, 5.0, (2,), np.float32)


def test_action_window_shows_executed_actions_scaled_to_the_box():
    env = HMMEnv(occupancy_config(token_window=1, action_window=2))
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs[env.layout.actions], np.zeros(4))
    env.step(np.array([5.0, -5.0]))
    obs = env.step(np.array([9.0, 0.0]))[0]  # clipped to (5, 0)
    np.testing.assert_allclose(obs[env.layout.actions], [1.0, 0.5, 1.0, 0.0])


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (np.zeros(3), r"OccupancyControlTask' expects actions of shape \(2,\), got shape \(3,\)"),
        (1.0, r"expects actions of shape \(2,\), got shape \(\)"),
        (np.array([np.nan, 0.0]), r"shape \(2,\) with finite values, got NaN or infinite"),
        (np.array([0.0, np.inf]), "OccupancyControlTask.*NaN or infinite"),
        ("left", "non-numeric"),
    ],
)
def test_bad_continuous_actions_raise_one_clear_error(action, message):
    env = HMMEnv(occupancy_config())
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(action)


def test_batched_continuous_actions_are_checked_and_ignored_while_auto_resetting():
    vector = HMMVectorEnv(3, occupancy_config(episode_length=1))
    vector.reset(seed=0)
    with pytest.raises(ValueError, match=r"expects actions of shape \(3, 2\), got shape \(3,\)"):
        vector.step(np.zeros(3))
    with pytest.raises(ValueError, match="NaN or infinite"):
        vector.step(np.array([[0.0, 0.0], [np.nan, 1.0], [0.0, 0.0]]))
    assert vector.step(np.zeros((3, 2)))[3].all()
    # Every copy auto-resets now: its action is ignored, even a NaN.
    _, rewards, _, truncated, info = vector.step(np.full((3, 2), np.nan))
    assert not truncated.any() and not rewards.any()  # the reset step: reward 0
    np.testing.assert_array_equal(info["action"], np.zeros((3, 2)))
    np.testing.assert_array_equal(info["transition_matrix"], np.tile(np.eye(3), (3, 1, 1)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"w_max": 5.0, "beta": 0.0}, "beta must be a positive number or None"),
        ({"w_max": 5.0, "beta": -1.0}, "beta must be a positive number"),
        ({"w_max": 0.0}, "w_max must be a positive number"),
        ({"w_max": -2.0, "beta": 4.0}, "w_max must be a positive number"),
        ({"w_max": 5.0, "occupancy_states": [3]}, r"occupancy_states must be distinct states"),
        ({"w_max": 5.0, "occupancy_states": []}, "occupancy_states"),
        ({"w_max": 5.0, "action_cost": -0.1}, "action_cost must be a number >= 0"),
    ],
)
def test_invalid_task_parameters_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HMMEnv(occupancy_config(task_kwargs=kwargs))


def test_continuous_tasks_need_a_moore_model():
    # Token drawn given the move (i, j), not by j alone: the task cannot set the transition.
    mealy = np.random.default_rng(0).dirichlet(np.ones(9), size=3).reshape(3, 3, 3)
    explicit = {"token_matrices": mealy.transpose(1, 0, 2).tolist()}
    with pytest.raises(ValueError, match="must emit each token from the state it enters"):
        HMMEnv(occupancy_config(model=explicit, model_kwargs={}))
    # MESS3 is Moore-form too, so the task runs on its chain as well.
    moore = HMMEnv(
        occupancy_config(
            model="rl_harness.envs.mess3:mess3_model", model_kwargs={"x": 0.05, "alpha": ALPHA}
        )
    )
    assert moore.reset(seed=0)[0].shape == (24,)


# ---------------------------------------------------------------- beliefs by brute force


def path_beliefs(actions: np.ndarray, tokens: list[int], seen: int) -> np.ndarray:
    """P(s_t | tokens o_1..o_seen, executed actions a_0..a_t-1), t = len(actions), by summing
    the probability of every hidden path s_0..s_t."""
    model = control_chain_model(ALPHA)
    emission = mess3_emission(ALPHA)
    matrices = [direct_tilt(a) for a in actions]
    t = len(actions)
    posterior = np.zeros(3)
    for path in itertools.product(range(3), repeat=t + 1):
        weight = model.initial[path[0]]
        for m in range(t):
            weight *= matrices[m][path[m], path[m + 1]]
        for m in range(1, seen + 1):  # o_m is emitted on arrival in s_m
            weight *= emission[path[m], tokens[m - 1]]
        posterior[path[-1]] += weight
    return posterior / posterior.sum()


@pytest.mark.parametrize("delay", [0, 1, 2])
def test_decision_and_full_beliefs_equal_enumeration_over_state_paths(delay):
    length = 6
    env = HMMEnv(occupancy_config(observation_delay=delay, episode_length=length, token_window=2))
    rng = np.random.default_rng(delay)
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        actions, tokens = [], []
        for t in range(length + 1):
            # The agent's view: the token window lags by the delay.
            window = obs[env.layout.tokens].reshape(2, 3)
            for slot in range(2):
                index = t - delay - slot  # o_index, emitted on arrival in s_index
                if index >= 1:
                    assert window[slot].argmax() == tokens[index - 1] and window[slot].sum() == 1
                else:
                    assert not window[slot].any()
            seen = max(t - delay, 0)
            np.testing.assert_allclose(
                info["decision_belief"], path_beliefs(np.array(actions), tokens, seen), atol=1e-12
            )
            np.testing.assert_allclose(
                info["belief"], path_beliefs(np.array(actions), tokens, t), atol=1e-12
            )
            if t == length:
                break
            action = rng.uniform(-6, 6, 2)
            obs, _, _, _, info = env.step(action)
            actions.append(np.clip(action, -5, 5))
            tokens.append(info["token"])


def test_discrete_tasks_report_decision_belief_and_executed_transition():
    # A discrete controlled task: the decision belief uses the executed action's chain too.
    config = {
        "model": "rl_harness.envs.mess3:mess3_model",
        "model_kwargs": {"x": 0.05, "alpha": 0.85},
        "task": "rl_harness.envs.mess3.tasks:ControlledTask",
        "task_kwargs": {"tilt": 1.5, "state_rewards": [1.0, 0.0, 0.0]},
        "observation_delay": 1,
        "info": ["belief", "decision_belief", "transition_matrix", "action"],
    }
    env = HMMEnv(config)
    info = env.reset(seed=0)[1]
    assert info["action"] == -1
    transitions = env.task.control_matrices().sum(axis=1)
    previous_full = info["belief"]
    for action in [0, 2, 3, 1, 1]:
        info = env.step(action)[4]
        assert info["action"] == action
        np.testing.assert_allclose(info["transition_matrix"], transitions[action])
        np.testing.assert_allclose(
            info["decision_belief"], previous_full @ transitions[action], atol=1e-12
        )
        previous_full = info["belief"]


def test_control_record_of_the_task_is_vectorized():
    task = OccupancyControlTask(control_chain_model(ALPHA), w_max=5.0, beta=4.0)
    actions = np.random.default_rng(0).uniform(-5, 5, (10, 2))
    control = task.control(actions)
    assert isinstance(control, Control)
    for a, u in zip(actions, control.transition_matrices, strict=True):
        np.testing.assert_allclose(u, direct_tilt(a), atol=1e-14)


@pytest.mark.parametrize("delay", [0, 1, 2])
def test_decision_belief_in_the_observation_is_the_info_one(delay):
    # include_decision_belief appends info["decision_belief"] to the observation (last, so
    # the other parts keep their places); with the option off nothing else changes.
    config = occupancy_config(token_window=2, action_window=1, observation_delay=delay)
    with_belief = HMMVectorEnv(3, config | {"include_decision_belief": True})
    without = HMMVectorEnv(3, config)
    layout = with_belief.layout
    assert layout.decision_belief == slice(without.layout.size, without.layout.size + 3)
    size = without.layout.size
    assert without.layout.decision_belief == slice(size, size)  # empty
    assert with_belief.single_observation_space.shape == (without.layout.size + 3,)
    rng = np.random.default_rng(5)
    obs, info = with_belief.reset(seed=[1, 2, 3])
    plain, _ = without.reset(seed=[1, 2, 3])
    for _ in range(12):
        np.testing.assert_array_equal(obs[:, : without.layout.size], plain)
        np.testing.assert_allclose(
            obs[:, layout.decision_belief], info["decision_belief"], atol=1e-7
        )
        actions = rng.uniform(-5, 5, size=(3, 2)).astype(np.float32)
        obs, _, _, _, info = with_belief.step(actions)
        plain, *_ = without.step(actions)
    with_belief.close()
    without.close()
    # Without the info key the belief is still tracked for the observation.
    alone = HMMEnv(
        occupancy_config(token_window=1, observation_delay=1, info=[])
        | {"include_decision_belief": True}
    )
    obs, _ = alone.reset(seed=0)
    np.testing.assert_allclose(obs[alone.layout.decision_belief], [0.45, 0.45, 0.10], atol=1e-7)
    obs, *_ = alone.step(np.array([5.0, -5.0], dtype=np.float32))
    assert obs[alone.layout.decision_belief].sum() == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="'include_decision_belief' must be a bool"):
        HMMEnv(occupancy_config(include_decision_belief=1))

"""MESS3 model, tasks and Bayes-optimal baselines."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import HMMEnv, HMMVectorEnv, next_token_probabilities
from rl_harness.envs.mess3 import (
    PAPER_ALPHA,
    PAPER_X,
    ControlledTask,
    bayes_optimal_next_token_reward,
    bayes_optimal_state_reward,
    mess3_model,
)
from tests.envs.helpers import ALL_INFO, mess3_config, word_probabilities


def test_mess3_token_matrices_follow_the_design_formula():
    assert (PAPER_X, PAPER_ALPHA) == (0.05, 0.85)
    x, alpha = 0.12, 0.7
    b, y = (1 - alpha) / 2, 1 - 2 * x
    model = mess3_model(x, alpha)
    for k in range(3):
        for i in range(3):
            for j in range(3):
                expected = (alpha if j == k else b) * (y if i == j else x)
                assert model.token_matrices[k, i, j] == pytest.approx(expected, abs=1e-15)
    assert model.n_states == model.n_tokens == 3


@pytest.mark.parametrize(("x", "alpha", "message"), [(-0.1, 0.5, "x must"), (0.1, 1.2, "alpha")])
def test_mess3_rejects_parameters_out_of_range(x, alpha, message):
    with pytest.raises(ValueError, match=message):
        mess3_model(x, alpha)


def test_controlled_task_tilts_the_chain_and_prices_it_by_kl():
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    task = ControlledTask(model, tilt=2.0, state_rewards=[1, 0, 0], kl_cost=0.5)
    controls = task.control_matrices()
    assert controls.shape == (4, 3, 3, 3) and task.action_space.n == 4
    np.testing.assert_allclose(controls[3], model.token_matrices)  # last action: passive
    p = model.transition_matrix
    for a in range(3):
        tilted = controls[a].sum(axis=0)
        np.testing.assert_allclose(tilted.sum(axis=1), 1.0)
        assert np.all(tilted[:, a] > p[:, a])
        # Token given the move is untouched by the tilt.
        np.testing.assert_allclose(controls[a] / tilted, model.token_matrices / p)
        direct = (tilted * np.log(tilted / p)).sum(axis=1)
        np.testing.assert_allclose(task.kl[a], direct)
    np.testing.assert_allclose(task.kl[3], 0.0, atol=1e-15)
    with pytest.raises(ValueError, match="state_rewards must be 3"):
        ControlledTask(model, tilt=1.0, state_rewards=[1, 0])


def test_controlled_env_beliefs_and_rewards_use_the_tilted_dynamics():
    config = mess3_config(
        task="rl_harness.envs.mess3.tasks:ControlledTask",
        task_kwargs={"tilt": 2.0, "state_rewards": [1.0, 0.0, -1.0], "kl_cost": 0.5},
        info=ALL_INFO,
        episode_length=400,
    )
    env = HMMEnv(config)
    task = env.task
    controls = task.control_matrices()
    belief = env.reset(seed=2)[1]["belief"]
    rng = np.random.default_rng(1)
    for _ in range(300):
        action = int(rng.integers(0, 4))
        _, reward, _, _, info = env.step(action)
        moved = belief @ controls[action, info["token"]]
        belief = moved / moved.sum()
        np.testing.assert_allclose(info["belief"], belief, atol=1e-12)
        parts = info["reward_components"]
        assert parts["state_reward"] == [1.0, 0.0, -1.0][info["state"]]
        assert parts["kl_cost"] == pytest.approx(0.5 * task.kl[action, info["state_before"]])
        assert reward == pytest.approx(parts["state_reward"] - parts["kl_cost"])
    # Always pushing towards state 0 must visit it far more than the uniform third.
    pushed = HMMEnv(config)
    pushed.reset(seed=3)
    visits = sum(pushed.step(0)[4]["state"] == 0 for _ in range(300))
    assert visits > 150


def exact_episode_reward(model, length: int) -> float:
    """Mean over steps t < length of E[max_k P(x_t+1 = k | x_1..t)], by enumerating words."""
    total = 0.0
    for t in range(length):
        _, probability, belief = word_probabilities(model, t)
        total += float((probability * next_token_probabilities(model, belief).max(axis=1)).sum())
    return total / length


def test_bayes_optimal_reward_matches_enumeration_for_short_episodes():
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    exact = exact_episode_reward(model, 5)
    estimate = bayes_optimal_next_token_reward(model, episode_length=5, n_sequences=20000)
    assert estimate == pytest.approx(exact, abs=4e-3)
    stationary = bayes_optimal_next_token_reward(model)
    long_episode = bayes_optimal_next_token_reward(model, episode_length=1024, n_sequences=64)
    assert stationary == pytest.approx(long_episode, abs=0.01)
    assert exact < stationary < 0.85  # early steps know less; no prediction beats alpha


@pytest.mark.parametrize(
    ("task", "baseline"),
    [
        ("NextTokenTask", bayes_optimal_next_token_reward),
        ("CurrentStateTask", bayes_optimal_state_reward),
    ],
)
def test_a_bayes_greedy_agent_in_the_env_earns_the_baseline(task, baseline):
    length, n = 32, 256
    config = mess3_config(
        task=f"rl_harness.envs.mess3.tasks:{task}", episode_length=length, info=["belief"]
    )
    vector = HMMVectorEnv(n, config)
    model = vector.model
    rewards = []
    for episode in range(4):
        belief = vector.reset(seed=1000 * episode)[1]["belief"]
        for _ in range(length):
            if task == "NextTokenTask":
                actions = next_token_probabilities(model, belief).argmax(axis=1)
            else:
                actions = belief.argmax(axis=1)
            _, reward, _, _, info = vector.step(actions)
            rewards.append(reward)
            belief = info["belief"]
    realized = np.mean(rewards)
    expected = baseline(model, episode_length=length, n_sequences=4096)
    # 32768 Bernoulli rewards: standard error below 0.003.
    assert realized == pytest.approx(expected, abs=0.012)

"""Occupancy control with an action cost: the solvers pay action_cost * |a| (Euclidean norm
of the executed, clipped action) exactly as the real env does."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.envs.mess3.solvers import (
    OccupancyProblem,
    solve_oracle,
    solve_reactive,
    table_values,
    visible_tokens,
)

COST = 0.3
PROBLEM = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0, action_cost=COST)


def test_solver_step_reward_is_the_env_reward_on_the_same_actions():
    n = 64
    info_keys = ["state_before", "action", "reward_components"]
    env = HMMVectorEnv(n, PROBLEM.env_config(1, episode_length=100, info=info_keys))
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(50):
        actions = rng.uniform(-8.0, 8.0, (n, 2))  # some outside the box: the env clips them
        actions[:4] = [[0.0, 0.0], [5.0, -5.0], [-3.0, 4.0], [0.0, -2.0]]
        _, reward, _, _, info = env.step(actions)
        executed = np.clip(actions, -5.0, 5.0)
        np.testing.assert_array_equal(info["action"], executed)
        _, paid = PROBLEM.step_terms(executed)  # (n, 3): the reward of leaving each state
        np.testing.assert_allclose(reward, paid[np.arange(n), info["state_before"]], atol=1e-12)
        penalty = info["reward_components"]["action_penalty"]
        np.testing.assert_allclose(penalty, COST * np.hypot(*executed.T), atol=1e-12)
    # Known values: (3, 4) costs 0.3 * 5 = 1.5 more than the same step without the cost.
    free = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0)
    difference = free.step_terms(np.array([3.0, 4.0]))[1] - PROBLEM.step_terms([3.0, 4.0])[1]
    np.testing.assert_allclose(difference, 1.5, atol=1e-12)


def realized(policy_of, problem, delay: int, n: int = 256, steps: int = 600, burn_in: int = 60):
    """Mean reward per step of `policy_of(obs, info, env)` in the real env (n copies), and
    the standard error of that mean."""
    config = problem.env_config(
        delay, episode_length=steps + 1, token_window=2, info=["state", "decision_belief"]
    )
    env = HMMVectorEnv(n, config)
    obs, info = env.reset(seed=21)
    total = np.zeros(n)
    for t in range(steps):
        obs, reward, _, _, info = env.step(policy_of(obs, info, env))
        if t >= burn_in:
            total += reward
    means = total / (steps - burn_in)
    return means.mean(), means.std(ddof=1) / np.sqrt(n)


def test_a_costly_table_earns_its_exact_value_in_the_env():
    table = np.array([[5.0, -5.0], [-2.0, 3.0], [-5.0, -5.0]])  # one action per newest token
    value = table_values(PROBLEM, 1, table[None])[0]
    free = table_values(OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0), 1, table[None])[0]
    assert free - value > 0.5  # the cost matters here: an L1 or squared norm would show

    def act(obs, info, env):
        return table[np.maximum(visible_tokens(obs, env.layout, 1)[:, 0], 0)]

    mean, error = realized(act, PROBLEM, 1)
    assert abs(mean - value) < 4 * error


@pytest.mark.parametrize("solver", ["oracle", "reactive"])
def test_costly_solutions_earn_their_value_in_the_env(tmp_path, solver):
    # At cost 0.05 the best reactive table is interior and rests (a = 0) after token 2: the
    # cost's kink at 0 is part of the optimum.
    problem = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0, action_cost=0.05)
    if solver == "oracle":
        solution = solve_oracle(problem, cache=tmp_path)
        mean, error = realized(lambda obs, info, env: solution.policy(info["state"]), problem, 1)
    else:
        solution = solve_reactive(problem, 1, per_axis=11, n_starts=8, cache=tmp_path)
        np.testing.assert_array_equal(solution.policy.table[2], [0.0, 0.0])
        mean, error = realized(
            lambda obs, info, env: solution.policy(visible_tokens(obs, env.layout, 1)), problem, 1
        )
    assert solution.converged and solution.residual < 1e-6
    assert abs(mean - solution.value) < 4 * error

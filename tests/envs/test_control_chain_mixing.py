"""The control chain's `mixing` (how slowly it mixes, MESS3's x for this chain): the lazy
chain keeps its stationary law, the env runs it, and the solvers' values hold there."""

from __future__ import annotations

import numpy as np
import pytest

from rl_harness.envs.hmm import HMMVectorEnv
from rl_harness.envs.mess3 import (
    CONTROL_CHAIN_TRANSITION,
    control_chain_model,
    control_chain_transition,
)
from rl_harness.envs.mess3.solvers import (
    OccupancyProblem,
    solve_belief_vi,
    table_values,
    visible_tokens,
)
from tests.envs.test_solvers import realized

SLOW = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0, mixing=0.3)


def test_the_lazy_chain_keeps_the_stationary_law_and_slows_down():
    assert control_chain_transition(1.0) is CONTROL_CHAIN_TRANSITION
    lazy = control_chain_transition(0.3)
    np.testing.assert_allclose(lazy, 0.7 * np.eye(3) + 0.3 * CONTROL_CHAIN_TRANSITION)
    np.testing.assert_allclose(lazy.sum(1), 1.0)
    stationary = np.array([0.45, 0.45, 0.10])
    np.testing.assert_allclose(stationary @ lazy, stationary, atol=1e-15)
    # Second eigenvalue 1 - m (1 - 0.6): the chain forgets m times as fast.
    moduli = sorted(np.abs(np.linalg.eigvals(lazy)))
    np.testing.assert_allclose(moduli[1:], [1 - 0.3 * 0.4, 1.0], atol=1e-12)
    model = control_chain_model(0.85, 0.3)
    np.testing.assert_allclose(model.transition_matrix, lazy, atol=1e-15)
    np.testing.assert_allclose(model.initial, stationary, atol=1e-12)


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, True, "0.3"])
def test_bad_mixing_is_one_clear_error(bad):
    with pytest.raises(ValueError, match="mixing must"):
        control_chain_transition(bad)
    with pytest.raises(ValueError, match="mixing must"):
        OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0, mixing=bad)


def test_settings_and_env_config_name_the_mixing_only_when_it_moves():
    flagship = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0)
    assert "mixing" not in flagship.settings()  # the fixed chain keeps its cache keys
    assert flagship.env_config(1)["model_kwargs"] == {"alpha": 0.85}
    assert SLOW.settings()["mixing"] == 0.3
    assert SLOW.env_config(1)["model_kwargs"] == {"alpha": 0.85, "mixing": 0.3}
    np.testing.assert_allclose(SLOW.base, control_chain_transition(0.3))


def test_the_env_runs_the_lazy_chain():
    config = SLOW.env_config(1, info=["state", "state_before"], episode_length=2001)
    env = HMMVectorEnv(64, config)
    env.reset(seed=3)
    stays, moves = np.zeros(3), np.zeros(3)
    for _ in range(2000):  # zero tilt: the base chain itself
        _, _, _, _, info = env.step(np.zeros((64, 2), dtype=np.float32))
        before, after = info["state_before"], info["state"]
        np.add.at(moves, before, 1)
        np.add.at(stays, before, before == after)
    expected = np.diag(control_chain_transition(0.3))
    np.testing.assert_allclose(stays / moves, expected, atol=0.01)


def test_a_table_and_the_belief_policy_earn_their_value_on_the_slow_chain(tmp_path):
    table = np.full((3, 2), -5.0)
    table[1] = [5.0, -5.0]  # after token 1, push 1 -> 2
    exact = table_values(SLOW, 1, table[None])[0]
    mean, error = realized(
        SLOW, 1, lambda obs, info, env: table[visible_tokens(obs, env.layout, 1)[:, 0]]
    )
    assert abs(mean - exact) < 4 * error
    solution = solve_belief_vi(SLOW, 1, per_edge=20, cache=tmp_path)
    mean, error = realized(SLOW, 1, lambda obs, info, env: solution.policy(info["decision_belief"]))
    assert abs(mean - solution.value) < 4 * error + 3e-3
    assert solution.value > exact

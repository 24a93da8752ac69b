"""The oracle: the hidden state is known. Average-reward value iteration over the continuous
tilt: relative value iteration on a dense action lattice, then policy iteration whose
improvement step polishes each state's action continuously (exact evaluation on 3 states)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from rl_harness.envs.mess3.solvers.cache import cached, resolve_cache
from rl_harness.envs.mess3.solvers.common import action_lattice, differential_values, polish
from rl_harness.envs.mess3.solvers.policies import StatePolicy
from rl_harness.envs.mess3.solvers.problem import OccupancyProblem
from rl_harness.envs.mess3.solvers.solution import Solution

_STATES = np.arange(3)


def _state_q(problem: OccupancyProblem, h: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Objective for `polish`: actions (3, C, 2) -> Q(s, a) (3, C), row s for state s."""

    def objective(actions: np.ndarray) -> np.ndarray:
        tilted, reward = problem.step_terms(actions)  # (3, C, 3, 3), (3, C, 3)
        rows = tilted[_STATES, :, _STATES]  # (3, C, 3): U_a(. | s)
        q: np.ndarray = reward[_STATES, :, _STATES] + rows @ h
        return q

    return objective


def _solve(
    problem: OccupancyProblem, per_axis: int, max_iterations: int
) -> tuple[float, dict[str, np.ndarray]]:
    lattice = action_lattice(problem.w_max, per_axis)
    tilted, reward = problem.step_terms(lattice)  # (A, 3, 3), (A, 3)
    h = np.zeros(3)
    lattice_converged = False
    for _ in range(100_000):  # relative value iteration on the lattice: the first policy
        q = reward + tilted @ h  # (A, 3)
        new = q.max(axis=0)
        change = new - h
        h = new - new[0]
        if change.max() - change.min() < 1e-12:
            lattice_converged = True
            break
    actions = lattice[q.argmax(axis=0)]
    spacing = 2 * problem.w_max / (per_axis - 1)
    rho, best, gain = -np.inf, actions, np.inf
    polished = converged = False
    for iteration in range(1, max_iterations + 2):  # policy iteration, continuous improvement
        chain_tilt, chain_reward = problem.step_terms(actions)
        chain = chain_tilt[_STATES, _STATES]
        new_rho, _, h = differential_values(chain, chain_reward[_STATES, _STATES])
        gain = new_rho - rho
        if gain <= 1e-14:  # no improvement: `best` is a fixed point of the polished step
            converged = polished
            break
        rho, best = new_rho, actions
        if iteration > max_iterations:  # the cap: this last evaluation only measures the gain
            break
        actions, _, polished = polish(
            _state_q(problem, h), actions, problem.w_max, spacing / 2, 1e-9
        )
    return rho, {
        "actions": best,
        "converged": np.array(converged and lattice_converged),
        "iterations": np.array(iteration),
        "residual": np.array(max(gain, 0.0)),
    }


def solve_oracle(
    problem: OccupancyProblem,
    *,
    per_axis: int = 81,
    max_iterations: int = 100,
    cache: bool | str | Path = True,
) -> Solution:
    """Best average reward per step when the hidden state is known, and its `StatePolicy`.

    max_iterations caps the policy-iteration steps; `converged` says the last step gained
    nothing (residual: the average-reward gain of the last step) and every polish converged.
    """
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    settings = {"solver": "oracle", "problem": problem.settings(), "per_axis": per_axis}
    settings["max_iterations"] = max_iterations
    value, arrays = cached(
        resolve_cache(cache),
        settings,
        lambda: _solve(problem, per_axis, max_iterations),
        name="oracle",
        plan=(
            f"state known, 3 states: value iteration over {per_axis**2:,} lattice actions, "
            f"then policy iteration with a continuous polish (at most {max_iterations} steps)"
        ),
    )
    return Solution.from_arrays("oracle", value, StatePolicy.from_arrays(arrays), settings, arrays)

"""The belief MDP of the occupancy-control task at observation delay 0 or 1, solved by
average-reward (relative) value iteration on a regular simplex grid.

The value function lives on the grid points and is interpolated barycentrically between them.
Each sweep maximizes over a dense action lattice; then the greedy action of every grid point
is polished continuously (compass search on the interpolated Q) and the polished actions join
the lattice for further sweeps, a few rounds.

Delay 1 (belief b over s_t given tokens up to o_{t-1}; o_t is emitted by s_t, whatever a_t):

    rho + V(b) = max_a [ b.r_a + sum_o P(o | b) V( normalize(b diag E[:, o]) U_a ) ],
    P(o | b) = b . E[:, o]

Delay 0 (b already conditions on o_t): next belief normalize((b U_a) diag E[:, o']) with
P(o' | b, a) = (b U_a) . E[:, o']. Here r_a(s) = 1[s occupied] - KL_s(a) / beta - c |a|.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rl_harness.envs.mess3.solvers.cache import cached, resolve_cache
from rl_harness.envs.mess3.solvers.common import action_lattice, polish
from rl_harness.envs.mess3.solvers.policies import BeliefPolicy
from rl_harness.envs.mess3.solvers.problem import OccupancyProblem
from rl_harness.envs.mess3.solvers.simplex import SimplexGrid
from rl_harness.envs.mess3.solvers.solution import Solution

# Bound the temporaries of one chunk of grid points x actions (entries of (chunk, C, 3, 3)).
_CHUNK_ENTRIES = 2_000_000


def _successors(
    problem: OccupancyProblem,
    grid: SimplexGrid,
    beliefs: np.ndarray,
    actions: np.ndarray,
    delay: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For beliefs (G, 3) and actions (G or 1, C, 2): expected reward (G, C), and the grid
    vertices (G, C, 9) int32 and weights (G, C, 9) of the next belief's value, summed over
    the 3 tokens: E[V(b') | b, a] = sum(weights * V[vertices])."""
    tilted, reward = problem.step_terms(actions)  # (G|1, C, 3, 3), (G|1, C, 3)
    emission = problem.emission  # (3 states, 3 tokens)
    expected = np.einsum(
        "gi,gci->gc", beliefs, np.broadcast_to(reward, (len(beliefs),) + reward.shape[1:])
    )
    if delay == 1:
        prob = beliefs @ emission  # (G, O): P(o_t | b)
        measured = beliefs[:, None, :] * emission.T[None]  # (G, O, 3)
        measured /= np.where(prob > 0, prob, 1.0)[..., None]
        nxt = np.einsum(
            "goi,gcij->gcoj", measured, np.broadcast_to(tilted, (len(beliefs),) + tilted.shape[1:])
        )
        prob = np.broadcast_to(prob[:, None, :], nxt.shape[:-1])
    else:
        moved = np.einsum(
            "gi,gcij->gcj", beliefs, np.broadcast_to(tilted, (len(beliefs),) + tilted.shape[1:])
        )
        joint = moved[:, :, None, :] * emission.T[None, None]  # (G, C, O, 3)
        prob = joint.sum(-1)
        nxt = joint / np.where(prob > 0, prob, 1.0)[..., None]
    index, weight = grid.locate(nxt)  # (G, C, O, 3)
    coef = (prob[..., None] * weight).reshape(*nxt.shape[:2], 9)
    return expected, index.reshape(*nxt.shape[:2], 9).astype(np.int32), coef


def _lattice_tables(
    problem: OccupancyProblem, grid: SimplexGrid, lattice: np.ndarray, delay: int
) -> tuple[np.ndarray, ...]:
    chunk = max(1, _CHUNK_ENTRIES // (len(lattice) * 9))
    parts = [
        _successors(problem, grid, grid.points[start : start + chunk], lattice[None], delay)
        for start in range(0, len(grid), chunk)
    ]
    return tuple(np.concatenate(p, axis=0) for p in zip(*parts, strict=True))


def _q(tables: tuple[np.ndarray, ...], values: np.ndarray) -> np.ndarray:
    expected, index, coef = tables
    q: np.ndarray = expected + (coef * values[index]).sum(-1)
    return q


def _solve(
    problem: OccupancyProblem,
    delay: int,
    per_edge: int,
    per_axis: int,
    tolerance: float,
    polish_rounds: int,
    max_sweeps: int,
    progress: bool,
) -> tuple[float, dict[str, np.ndarray]]:
    grid = SimplexGrid(per_edge)
    lattice = action_lattice(problem.w_max, per_axis)
    spacing = 2 * problem.w_max / (per_axis - 1)
    tables = _lattice_tables(problem, grid, lattice, delay)
    values = np.zeros(len(grid))
    extra = extra_tables = None  # the polished action of each grid point, once there is one
    sweeps = 0
    converged = True  # every round's iteration reached `tolerance`, every polish converged
    for round_ in range(polish_rounds + 1):
        for sweep in range(1, max_sweeps + 1):
            q = _q(tables, values)
            greedy = lattice[q.argmax(axis=1)]
            best = q.max(axis=1)
            if extra is not None and extra_tables is not None:
                q_extra = _q(extra_tables, values)[:, 0]
                greedy = np.where((q_extra > best)[:, None], extra, greedy)
                best = np.maximum(best, q_extra)
            change = best - values
            values = best - best[0]
            sweeps += 1
            if change.max() - change.min() < tolerance:
                break
            if sweep == max_sweeps:
                converged = False
        residual = float(change.max() - change.min())  # span of the last Bellman change
        rho = 0.5 * (change.max() + change.min())
        if progress:
            print(
                f"belief_vi: delay {delay}, grid {per_edge}, round {round_}: rho {rho:.6f} "
                f"after {sweeps} sweeps",
                flush=True,
            )
        if round_ == polish_rounds:
            break

        def objective(candidates: np.ndarray, values: np.ndarray = values) -> np.ndarray:
            return _q(_successors(problem, grid, grid.points, candidates, delay), values)

        extra, _, polished = polish(objective, greedy, problem.w_max, spacing / 2, 1e-6)
        converged = converged and polished
        extra_tables = _successors(problem, grid, grid.points, extra[:, None], delay)
    return float(rho), {
        "per_edge": np.array(per_edge),
        "actions": greedy,
        "converged": np.array(converged),
        "iterations": np.array(sweeps),
        "residual": np.array(residual),
    }


def solve_belief_vi(
    problem: OccupancyProblem,
    delay: int,
    *,
    per_edge: int = 30,
    per_axis: int = 33,
    tolerance: float = 1e-9,
    polish_rounds: int = 2,
    max_sweeps: int = 10_000,
    cache: bool | str | Path = True,
    progress: bool = False,
) -> Solution:
    """Average reward per step of the belief MDP at `delay` (0 or 1) and its `BeliefPolicy`.

    per_edge: simplex grid intervals per edge; per_axis: action lattice points per axis;
    max_sweeps caps each round's value-iteration sweeps. `converged`: every round's sweeps
    reached `tolerance` (the span of the Bellman change, reported as `residual`) and every
    polish converged; `iterations`: the sweeps of all rounds.
    """
    if delay not in (0, 1):
        raise ValueError(f"belief_vi solves delay 0 or 1, got {delay}")
    if max_sweeps < 1:
        raise ValueError(f"max_sweeps must be >= 1, got {max_sweeps}")
    settings = {
        "solver": "belief_vi",
        "problem": problem.settings(),
        "delay": delay,
        "per_edge": per_edge,
        "per_axis": per_axis,
        "tolerance": tolerance,
        "polish_rounds": polish_rounds,
        "max_sweeps": max_sweeps,
    }
    n_beliefs = (per_edge + 1) * (per_edge + 2) // 2  # SimplexGrid(per_edge)'s points
    value, arrays = cached(
        resolve_cache(cache),
        settings,
        lambda: _solve(
            problem, delay, per_edge, per_axis, tolerance, polish_rounds, max_sweeps, progress
        ),
        name=f"belief_vi (delay {delay})",
        plan=(
            f"relative value iteration on {n_beliefs:,} grid beliefs ({per_edge} intervals per "
            f"edge) x {per_axis**2:,} lattice actions, {polish_rounds} continuous polish rounds"
        ),
    )
    return Solution.from_arrays(
        "belief_vi", value, BeliefPolicy.from_arrays(arrays), settings, arrays
    )

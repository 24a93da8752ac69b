"""Policies on the last k visible tokens (reactive: k = 1; stack_k), solved exactly.

With delay d, at step t the agent sees o_{t-d-k+1} .. o_{t-d} (o_t is emitted on arrival in
s_t). The chain X_t = (s_t, o_{t-m} .. o_{t-1}), m = d + k - 1, is Markov under a table
policy: o_t ~ E[s_t, .] is drawn afresh, the visible window is the oldest k of
(o_{t-m} .. o_t), and s_{t+1} ~ U_a(s_t, .). A table's value is exact: the stationary law of
that chain dotted with the expected reward of each X.

The value is multimodal in the table, so: for k = 1 scan whole tables on a coarse action
lattice first (every combination) and keep the best few as starts; for k > 1 start from the
best (k - 1)-table (which embeds in a k-table, so stack_k >= stack_{k-1}). Then block
coordinate ascent, exact throughout: window by window, scan the window's action over a dense
lattice and polish it (compass search), every candidate valued exactly. A window's action only
changes the few rows of the chain whose visible window it is, so each candidate's stationary
law is a low-rank update of the current one through the fundamental matrix
Z = (I - P + 1 pi)^-1: pi' = pi + pi'_R D Z with D the change of rows R. Sweeps repeat until
no window gains more than 1e-12.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rl_harness.envs.mess3.solvers.cache import cached, resolve_cache
from rl_harness.envs.mess3.solvers.common import (
    action_lattice,
    average_reward,
    differential_values,
    polish,
)
from rl_harness.envs.mess3.solvers.policies import WindowPolicy
from rl_harness.envs.mess3.solvers.problem import OccupancyProblem
from rl_harness.envs.mess3.solvers.solution import Solution

_SCAN_ENTRIES = 4_000_000  # bound on a batch of whole-table evaluations (tables x S x S)


@dataclass(frozen=True)
class WindowChain:
    """Index tables of the joint chain for (delay, k). X = s * 3**m + code(o_{t-m} .. o_{t-1}),
    codes with the oldest token most significant."""

    delay: int
    k: int

    @property
    def m(self) -> int:
        return self.delay + self.k - 1

    @property
    def size(self) -> int:
        return 3 ** (self.m + 1)

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """state (S,), visible window index (S, 3 tokens o_t), next X without s' (S, 3)."""
        span = 3**self.m
        x = np.arange(self.size)
        state, code = np.divmod(x, span)
        sequence = code[:, None] * 3 + np.arange(3)[None]  # code of (o_{t-m} .. o_t)
        visible = sequence // 3**self.delay  # the oldest k: o_{t-d-k+1} .. o_{t-d}
        return state, visible, sequence % span


def _rows(problem: OccupancyProblem, chain: WindowChain, tables: np.ndarray, rows: np.ndarray):
    """Rows `rows` (r,) of the joint chain's transition matrix, (B, r, S), and their expected
    rewards (B, r), for tables (B, 3**k, 2)."""
    state, visible, rest = chain.tables()
    state, visible, rest = state[rows], visible[rows], rest[rows]
    span = 3**chain.m
    # Only the windows these rows can see: a few when r is small (one-window updates).
    windows, visible = np.unique(visible, return_inverse=True)
    visible = visible.reshape(len(rows), 3)
    tilted, reward = problem.step_terms(tables[:, windows])  # (B, w, 3, 3), (B, w, 3)
    emission = problem.emission[state]  # (r, 3): P(o_t | s_t)
    moves = tilted[:, visible, state[:, None], :]  # (B, r, 3 o, 3 s')
    paid = reward[:, visible, state[:, None]]  # (B, r, 3 o)
    rewards = (emission[None] * paid).sum(-1)
    probability = emission[None, :, :, None] * moves  # (B, r, o, s')
    target = np.arange(3)[None, None, :] * span + rest[:, :, None]  # (r, o, s')
    transitions = np.zeros((len(tables), len(rows), chain.size))
    local = np.arange(len(rows))[:, None, None]
    if chain.m == 0:  # the next X is s' alone: sum over tokens
        transitions[:, local[:, 0], np.arange(3)[None]] = probability.sum(2)
    else:  # distinct (o, s') reach distinct X'
        transitions[:, local, target] = probability
    return transitions, rewards


def _chain(problem: OccupancyProblem, chain: WindowChain, tables: np.ndarray):
    """Transition matrices (B, S, S) and rewards (B, S) of the joint chain for tables."""
    return _rows(problem, chain, tables, np.arange(chain.size))


def table_values(problem: OccupancyProblem, delay: int, tables: np.ndarray) -> np.ndarray:
    """Exact long-run average reward per step of table policies (B, 3**k, 2) at `delay`."""
    tables = np.asarray(tables, dtype=np.float64)
    k = round(np.log(tables.shape[1]) / np.log(3))
    transitions, rewards = _chain(problem, WindowChain(delay, k), tables)
    return average_reward(transitions, rewards)


class _Coordinate:
    """Exact values of tables that differ from the current one in one window only."""

    def __init__(self, problem: OccupancyProblem, chain: WindowChain, table: np.ndarray):
        self.problem, self.chain, self.table = problem, chain, table
        transitions, rewards = _chain(problem, chain, table[None])
        self.transitions, self.rewards = transitions[0], rewards[0]
        self.value, self.law, _ = differential_values(self.transitions, self.rewards)
        size = chain.size
        self.fundamental = np.linalg.inv(
            np.eye(size) - self.transitions + np.outer(np.ones(size), self.law)
        )
        _, visible, _ = chain.tables()
        self._visible = visible

    def values(self, window: int, candidates: np.ndarray) -> np.ndarray:
        """Exact values (C,) of the current table with window `window` set to candidates."""
        rows = np.flatnonzero((self._visible == window).any(axis=1))
        tables = np.repeat(self.table[None], len(candidates), axis=0)
        tables[:, window] = candidates
        new_rows, new_rewards = _rows(self.problem, self.chain, tables, rows)
        change = new_rows - self.transitions[rows]  # (C, r, S)
        dz = change @ self.fundamental  # (C, r, S)
        system = np.eye(len(rows)) - dz[:, :, rows]  # (C, r, r)
        law_rows = np.linalg.solve(
            np.swapaxes(system, 1, 2),
            np.broadcast_to(self.law[rows], (len(candidates), len(rows)))[..., None],
        )[..., 0]
        law = self.law + np.einsum("cr,crs->cs", law_rows, dz)
        value = law @ self.rewards
        return value + (law[:, rows] * (new_rewards - self.rewards[rows])).sum(axis=1)


def _coordinate_sweep(problem, chain, table, lattice, spacing):
    """One pass over the windows: each window's action scanned on the lattice and polished,
    every candidate valued exactly; a change is kept when it raises the value."""
    current = _Coordinate(problem, chain, table)
    for window in range(len(table)):
        scan = current.values(window, lattice)
        best = lattice[scan.argmax()] if scan.max() > current.value else table[window]

        def objective(candidates, window=window, current=current):
            return current.values(window, candidates[0])[None]

        action, gain = polish(objective, best[None], problem.w_max, spacing / 2, 1e-7)
        if gain[0] > current.value + 1e-13:
            table = table.copy()
            table[window] = action[0]
            current = _Coordinate(problem, chain, table)
    return current


def _gradient_steps(problem, chain, current, scale, n_steps=30):
    """Projected gradient ascent on the whole table (joint moves the sweep cannot make),
    with exact values, a backtracking step size and per-window finite-difference gradients."""
    eps = 1e-6
    probes = eps * np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], dtype=np.float64)
    for _ in range(n_steps):
        table = current.table
        gradient = np.empty_like(table)
        for window in range(len(table)):
            at = current.values(window, np.clip(table[window] + probes, -9e9, 9e9))
            gradient[window] = [(at[0] - at[1]) / (2 * eps), (at[2] - at[3]) / (2 * eps)]
        norm = np.abs(gradient).max()
        if norm < 1e-12:
            break
        for _ in range(30):
            trial = np.clip(table + scale * gradient / norm, -problem.w_max, problem.w_max)
            value = table_values(problem, chain.delay, trial[None])[0]
            if value > current.value + 1e-13:
                current = _Coordinate(problem, chain, trial)
                scale *= 2
                break
            scale /= 2
        else:
            break
    return current, scale


def _improve(problem, chain, table, lattice, spacing, progress, label):
    current = _Coordinate(problem, chain, np.array(table, dtype=np.float64))
    scale = spacing
    rounds = 0
    while rounds < 100:
        rounds += 1
        start_value = current.value
        current = _coordinate_sweep(problem, chain, current.table, lattice, spacing)
        current, scale = _gradient_steps(problem, chain, current, max(scale, 1e-3))
        if current.value - start_value < 1e-10:
            break
    if progress:
        print(f"{label}: value {current.value:.6f} after {rounds} rounds", flush=True)
    return current.value, current.table


def _scan_reactive(problem, chain, per_axis, n_starts):
    """The best few whole k = 1 tables on a coarse lattice (every combination)."""
    coarse = action_lattice(problem.w_max, per_axis)
    n = len(coarse)
    combos = np.stack(np.meshgrid(*[np.arange(n)] * 3, indexing="ij"), -1).reshape(-1, 3)
    chunk = max(1, _SCAN_ENTRIES // chain.size**2)
    values = np.concatenate(
        [
            table_values(problem, chain.delay, coarse[combos[i : i + chunk]])
            for i in range(0, len(combos), chunk)
        ]
    )
    best = np.argsort(values)[::-1][:n_starts]
    return [coarse[combos[i]] for i in best]


def _solve(problem, delay, k, per_axis, scan_per_axis, n_starts, start_table, progress):
    chain = WindowChain(delay, k)
    lattice = action_lattice(problem.w_max, per_axis)
    spacing = 2 * problem.w_max / (per_axis - 1)
    if k == 1:
        starts = _scan_reactive(problem, chain, scan_per_axis, n_starts)
    else:
        # v mod 3**(k-1) drops the oldest token: the (k-1)-table acting on a k-window.
        starts = [start_table[np.arange(3**k) % 3 ** (k - 1)]]
        # Plus a few seeded random tables: the landscape has separated optima.
        rng = np.random.default_rng(k)
        starts += [rng.uniform(-1, 1, (3**k, 2)) * problem.w_max for _ in range(n_starts - 1)]
    best_value, best_table = -np.inf, None
    for number, start in enumerate(starts):
        label = f"stack_{k} (delay {delay}) start {number}"
        value, table = _improve(problem, chain, start, lattice, spacing, progress, label)
        if value > best_value:
            best_value, best_table = value, table
    return float(best_value), {"k": np.array(k), "table": best_table}


def solve_stack(
    problem: OccupancyProblem,
    delay: int,
    k: int,
    *,
    per_axis: int = 17,
    scan_per_axis: int = 9,
    n_starts: int = 6,
    cache: bool | str | Path = True,
    progress: bool = False,
) -> Solution:
    """Best policy on the last k visible tokens at `delay` ("reactive" when k = 1)."""
    if not 1 <= k <= 4:
        raise ValueError(f"stack_k solves k = 1..4, got {k}")
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise ValueError(f"delay must be an int >= 0, got {delay!r}")
    settings = {
        "solver": "stack",
        "problem": problem.settings(),
        "delay": delay,
        "k": k,
        "per_axis": per_axis,
        "scan_per_axis": scan_per_axis,
        "n_starts": n_starts,
    }
    start_table = None
    if k > 1:
        previous = solve_stack(
            problem,
            delay,
            k - 1,
            per_axis=per_axis,
            scan_per_axis=scan_per_axis,
            n_starts=n_starts,
            cache=cache,
            progress=progress,
        )
        start_table = previous.policy.table
    value, arrays = cached(
        resolve_cache(cache),
        settings,
        lambda: _solve(problem, delay, k, per_axis, scan_per_axis, n_starts, start_table, progress),
    )
    name = "reactive" if k == 1 else f"stack_{k}"
    return Solution(name, value, WindowPolicy.from_arrays(arrays), settings)


def solve_reactive(problem: OccupancyProblem, delay: int, **options) -> Solution:
    """The best memoryless policy on the newest visible token (stack_k with k = 1)."""
    return solve_stack(problem, delay, 1, **options)

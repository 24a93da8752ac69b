"""Policies on the last k visible tokens (reactive: k = 1; stack_k), solved exactly.

With delay d, at step t the agent sees o_{t-d-k+1} .. o_{t-d} (o_t is emitted on arrival in
s_t). The chain X_t = (s_t, o_{t-m} .. o_{t-1}), m = d + k - 1, is Markov under a table
policy: o_t ~ E[s_t, .] is drawn afresh, the visible window is the oldest k of
(o_{t-m} .. o_t), and s_{t+1} ~ U_a(s_t, .). A table's value is exact: the stationary law of
that chain dotted with the expected reward of each X (`table_values`).

The value is multimodal in the table (3**k windows, a 2-D action each), and its optima often
sit on the box's edges and corners. The search, in order:

1. Starts. Whole-table scans, every combination: for k = 1 every table on a 9 x 9 lattice
   per window (corners, edge midpoints and 0 included); for larger k every all-corner table
   while there are at most 4**9 of them (k = 2). The best distinct tables of the scan, the
   distinct optima of the (k - 1) solve lifted to k windows (so stack_k >= stack_{k-1}),
   the zero table, and seeded random tables on the corners / edges / 0 of the box.
2. From each start, coordinate ascent: window by window, every action of a dense lattice
   (21 x 21 by default, corners, edges and 0 included) is valued exactly and the best taken
   if it gains; then a bounded L-BFGS-B polish of the whole table (exact value and exact
   gradient); rounds repeat until a round gains nothing (converged) or `max_rounds`.

A window's action only changes the few rows R of the chain whose visible window it is, so a
candidate's value is a low-rank update of the current chain's through the fundamental matrix
Z = (I - P + 1 pi)^-1: pi' = pi + pi'_R D Z with D the change of rows R, hence
rho' = rho + pi'_R (D Z r + r'_R - r_R). The gradient is pi (dP Z r + dr).

This is a search, not a proof: `Solution.search` says what it covered. For k = 1 the whole
table space is scanned on a lattice before the polish; for k >= 2 only the corner tables are
scanned whole (k = 2), the rest is multi-start coordinate ascent.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import comb
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from rl_harness.envs.mess3.solvers.cache import cached, resolve_cache
from rl_harness.envs.mess3.solvers.common import action_lattice, stationary
from rl_harness.envs.mess3.solvers.policies import WindowPolicy
from rl_harness.envs.mess3.solvers.problem import OccupancyProblem
from rl_harness.envs.mess3.solvers.solution import Solution

_SCAN_ENTRIES = 4_000_000  # bound on a batch of whole-table evaluations (tables x S x S)
_SCAN_TABLES = 600_000  # a whole-table scan covers at most this many tables
_KEEP = 8  # distinct optima kept (and lifted into the k + 1 solve)
_GAIN = 1e-10  # a coordinate move must raise the value by more than this
_KKT = 1e-6  # a converged table's projected gradient (max norm) is below this
_DISTINCT = 1e-3  # tables closer than this (max norm) count as the same optimum
_TRIPLES = 3000  # the final 3-window check runs while there are at most this many triples


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
        return int(3 ** (self.m + 1))

    def tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """state (S,), visible window index (S, 3 tokens o_t), next X without s' (S, 3)."""
        span = 3**self.m
        x = np.arange(self.size)
        state, code = np.divmod(x, span)
        sequence = code[:, None] * 3 + np.arange(3)[None]  # code of (o_{t-m} .. o_t)
        visible = sequence // 3**self.delay  # the oldest k: o_{t-d-k+1} .. o_{t-d}
        return state, visible, sequence % span

    def targets(self) -> np.ndarray:
        """The next X of each (X, o_t, s'), shape (S, 3, 3) (repeats over o_t when m = 0)."""
        _, _, rest = self.tables()
        span = 3**self.m
        targets: np.ndarray = np.arange(3)[None, None, :] * span + rest[:, :, None]
        return targets


def _rows(
    problem: OccupancyProblem, chain: WindowChain, tables: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows `rows` (r,) of the joint chain's transition matrix, (B, r, S), and their expected
    rewards (B, r), for tables (B, 3**k, 2)."""
    state, visible, rest = chain.tables()
    state, visible, rest = state[rows], visible[rows], rest[rows]
    span = 3**chain.m
    # Only the windows these rows can see: a few when r is small.
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


def _chain(
    problem: OccupancyProblem, chain: WindowChain, tables: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Transition matrices (B, S, S) and rewards (B, S) of the joint chain for tables."""
    return _rows(problem, chain, tables, np.arange(chain.size))


def table_values(problem: OccupancyProblem, delay: int, tables: ArrayLike) -> np.ndarray:
    """Exact long-run average reward per step of table policies (B, 3**k, 2) at `delay`."""
    tables = np.asarray(tables, dtype=np.float64)
    k = round(np.log(tables.shape[1]) / np.log(3))
    transitions, rewards = _chain(problem, WindowChain(delay, k), tables)
    values: np.ndarray = (stationary(transitions) * rewards).sum(-1)
    return values


class _Current:
    """One table's joint chain: its exact value, the exact values of tables that differ from
    it in one window (low-rank update), and the exact gradient."""

    def __init__(self, problem: OccupancyProblem, chain: WindowChain, table: np.ndarray):
        self.problem, self.chain = problem, chain
        self.table = np.array(table, dtype=np.float64)
        transitions, rewards = _chain(problem, chain, self.table[None])
        self.rewards = rewards[0]
        self.law = stationary(transitions[0])
        self.value = float(self.law @ self.rewards)
        size = chain.size
        self.fundamental = np.linalg.inv(
            np.eye(size) - transitions[0] + np.outer(np.ones(size), self.law)
        )
        self.gain = self.fundamental @ self.rewards  # g = Z r: rho' - rho = pi'_R (D g + dr)
        self.state, self.visible, _ = chain.tables()
        self.targets = chain.targets().reshape(size, 9)

    def values(self, windows: int | np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Exact values (C,) of the current table with the distinct windows `windows` (n,)
        set to candidates (C, n, 2) ((C, 2) for one window)."""
        windows = np.atleast_1d(windows)
        candidates = np.asarray(candidates, dtype=np.float64)
        candidates = candidates.reshape(len(candidates), len(windows), 2)
        rows = np.flatnonzero(np.isin(self.visible, windows).any(axis=1))
        # Row 0: the current table; rows 1..C: the candidates (only the windows seen here).
        seen, local = np.unique(self.visible[rows], return_inverse=True)
        tables = np.repeat(self.table[seen][None], len(candidates) + 1, axis=0)
        tables[1:, np.searchsorted(seen, windows)] = candidates
        tilted, reward = self.problem.step_terms(tables)  # (C + 1, L, 3, 3), (C + 1, L, 3)
        state, local = self.state[rows], local.reshape(len(rows), 3)
        emission = self.problem.emission[state]  # (r, o)
        moves = tilted[:, local, state[:, None]]  # (C + 1, r, o, s')
        probability = (emission[None, :, :, None] * moves).reshape(len(tables), len(rows), 9)
        rewards = (emission[None] * reward[:, local, state[:, None]]).sum(-1)  # (C + 1, r)
        change = probability[1:] - probability[0]  # D on the targets, (C, r, 9)
        targets = self.targets[rows]  # (r, 9)
        dz = np.einsum("cri,rij->crj", change, self.fundamental[targets][:, :, rows])
        dg = np.einsum("cri,ri->cr", change, self.gain[targets])
        system = np.eye(len(rows)) - dz  # pi'_R (I - (D Z)_RR) = pi_R
        law_rows = np.linalg.solve(
            np.swapaxes(system, 1, 2),
            np.broadcast_to(self.law[rows], (len(candidates), len(rows)))[..., None],
        )[..., 0]
        values: np.ndarray = self.value + (law_rows * (dg + rewards[1:] - rewards[0])).sum(axis=1)
        return values

    def gradient(self) -> np.ndarray:
        """d value / d table, (W, 2): sum over (X, o) of pi(X) E(s, o) (dr + dU . g(next))."""
        d_tilted, d_reward = self.problem.step_gradients(self.table)  # (W,2,3,3), (W,2,3)
        state, visible = self.state[:, None], self.visible  # (S, 1), (S, 3)
        weight = self.law[:, None] * self.problem.emission[self.state]  # (S, o)
        ahead = self.gain[self.targets].reshape(-1, 3, 3)  # (S, o, s')
        moved = np.einsum("xomj,xoj->xom", d_tilted[visible, :, state], ahead)
        terms = weight[..., None] * (d_reward[visible, :, state] + moved)  # (S, o, 2)
        gradient = np.zeros_like(self.table)
        np.add.at(gradient, visible.ravel(), terms.reshape(-1, 2))
        return gradient

    def resting(self) -> np.ndarray:
        """Windows (W,) bool whose action is 0 where actions cost and the cost's kink absorbs
        the rest of the gradient (norm <= action_cost * how often the window acts): optimal
        in place, and where a smooth method must not go (|a| has no gradient at 0)."""
        kink: np.ndarray = (self.table == 0).all(axis=1) & (self.problem.action_cost > 0)
        if not kink.any():
            return kink
        usage = np.zeros(len(self.table))
        weight = self.law[:, None] * self.problem.emission[self.state]  # (S, o)
        np.add.at(usage, self.visible.ravel(), weight.ravel())
        absorbed = np.linalg.norm(self.gradient(), axis=1) <= self.problem.action_cost * usage
        resting: np.ndarray = kink & absorbed
        return resting

    def residual(self) -> float:
        """Projected gradient (max norm) in the box, resting windows excluded: 0 at a
        first-order (KKT) point."""
        w_max = self.problem.w_max
        step = np.clip(self.table + self.gradient(), -w_max, w_max) - self.table
        step[self.resting()] = 0.0
        return float(np.abs(step).max())


def _polish(current: _Current, max_iterations: int) -> _Current:
    """Bounded L-BFGS-B on the whole table from `current` (exact value and gradient), resting
    windows held at 0."""
    from scipy.optimize import minimize  # the only SciPy use in envs; imported when solving

    problem, chain = current.problem, current.chain
    free = ~current.resting()
    if not free.any():
        return current

    def table_of(flat: np.ndarray) -> np.ndarray:
        table = current.table.copy()
        table[free] = flat.reshape(-1, 2)
        return table

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        point = _Current(problem, chain, table_of(flat))
        return -point.value, -point.gradient()[free].ravel()

    result = minimize(
        objective,
        current.table[free].ravel(),
        jac=True,
        method="L-BFGS-B",
        bounds=[(-problem.w_max, problem.w_max)] * (2 * int(free.sum())),
        options={"maxiter": max_iterations, "ftol": 0.0, "gtol": 1e-10},
    )
    flat = np.clip(result.x, -problem.w_max, problem.w_max)
    polished = _Current(problem, chain, table_of(flat))
    return polished if polished.value > current.value else current


@dataclass(frozen=True)
class _Ascent:
    value: float
    table: np.ndarray
    rounds: int
    converged: bool


def _sweep(current: _Current, lattice: np.ndarray) -> _Current:
    """One pass over the windows: each window's action set to its best on the lattice (every
    candidate valued exactly) when that gains more than _GAIN."""
    for window in range(len(current.table)):
        values = current.values(window, lattice)
        best = int(values.argmax())
        if values[best] > current.value + _GAIN:
            table = current.table.copy()
            table[window] = lattice[best]
            current = _Current(current.problem, current.chain, table)
    return current


def _pair_sweep(current: _Current, pairs: np.ndarray) -> _Current:
    """One pass over the pairs of windows: each pair set to its best joint move among `pairs`
    (P, 2, 2) (every corner / edge midpoint / 0 combination) when that gains more than _GAIN.
    It crosses the valleys between bang-bang optima that one window at a time cannot."""
    n_windows = len(current.table)
    for first in range(n_windows):
        for second in range(first + 1, n_windows):
            windows = np.array([first, second])
            values = current.values(windows, pairs)
            best = int(values.argmax())
            if values[best] > current.value + _GAIN:
                table = current.table.copy()
                table[windows] = pairs[best]
                current = _Current(current.problem, current.chain, table)
    return current


def _triple_sweep(current: _Current, bang: np.ndarray) -> _Current:
    """One pass over every triple of windows, each set to its best joint move among all
    combinations of `bang` actions when that gains more than _GAIN (the final check)."""
    n = len(bang)
    triples = bang[np.stack(np.unravel_index(np.arange(n**3), (n, n, n)), axis=1)]
    for windows in combinations(range(len(current.table)), 3):
        values = current.values(np.array(windows), triples)
        best = int(values.argmax())
        if values[best] > current.value + _GAIN:
            table = current.table.copy()
            table[list(windows)] = triples[best]
            current = _Current(current.problem, current.chain, table)
    return current


def _ascend(
    current: _Current, lattice: np.ndarray, pairs: np.ndarray, max_rounds: int, polished: bool
) -> _Ascent:
    """Rounds of (lattice sweep, pair sweep and, when `polished`, an L-BFGS-B polish) until a
    round gains nothing (converged), or max_rounds."""
    for rounds in range(1, max_rounds + 1):
        start = current.value
        current = _pair_sweep(_sweep(current, lattice), pairs)
        if polished:
            current = _polish(current, 20 * current.table.size)
        if current.value <= start + _GAIN:
            return _Ascent(current.value, current.table, rounds, True)
    return _Ascent(current.value, current.table, max_rounds, False)


def _scan(problem: OccupancyProblem, chain: WindowChain, choices: np.ndarray, n: int) -> np.ndarray:
    """The n best tables (n, W, 2) among every table whose windows take actions in `choices`
    (A, 2): A**W tables, valued exactly in chunks."""
    n_windows = 3**chain.k
    total = len(choices) ** n_windows
    chunk = max(1, _SCAN_ENTRIES // chain.size**2)
    powers = len(choices) ** np.arange(n_windows)
    values = np.empty(total)
    for start in range(0, total, chunk):
        index = np.arange(start, min(start + chunk, total))
        digits = (index[:, None] // powers) % len(choices)
        values[start : start + len(index)] = table_values(problem, chain.delay, choices[digits])
    best = np.argsort(values)[::-1][:n]
    tables: np.ndarray = choices[(best[:, None] // powers) % len(choices)]
    return tables


def _distinct(results: list[_Ascent], n: int) -> list[_Ascent]:
    """The n best results, one per optimum (tables closer than _DISTINCT merge)."""
    kept: list[_Ascent] = []
    for result in sorted(results, key=lambda r: -r.value):
        if all(np.abs(result.table - other.table).max() > _DISTINCT for other in kept):
            kept.append(result)
        if len(kept) == n:
            break
    return kept


def _scan_choices(w_max: float, k: int, scan_per_axis: int) -> tuple[str, np.ndarray] | None:
    """The whole-table scan of the starts: (what it covers, the actions each window takes),
    or None when even the all-corner tables are too many (k >= 3)."""
    n_windows = 3**k
    coarse = action_lattice(w_max, scan_per_axis)
    if len(coarse) ** n_windows <= _SCAN_TABLES:
        label = f"all {len(coarse)}**{n_windows} tables on a {scan_per_axis}x{scan_per_axis} "
        return label + "lattice scanned", coarse
    corners = np.array([[-1, -1], [-1, 1], [1, -1], [1, 1]], dtype=np.float64) * w_max
    if len(corners) ** n_windows <= _SCAN_TABLES:
        return f"all 4**{n_windows} corner tables scanned", corners
    return None


def _starts(
    problem: OccupancyProblem,
    chain: WindowChain,
    lifted: np.ndarray | None,
    scan_per_axis: int,
    n_starts: int,
    seed: int,
) -> dict[str, np.ndarray]:
    """Named groups of start tables (see the module docstring) and what they cover."""
    n_windows = 3**chain.k
    w_max = problem.w_max
    groups: dict[str, np.ndarray] = {}
    scan = _scan_choices(w_max, chain.k, scan_per_axis)
    if scan is not None:
        label, choices = scan
        groups[label] = _scan(problem, chain, choices, n_starts)
    if lifted is not None:
        # Window v mod 3**(k-1) drops the oldest token: a (k-1)-table acting on k-windows.
        groups[f"{len(lifted)} lifted stack_{chain.k - 1} optima"] = lifted[
            :, np.arange(n_windows) % 3 ** (chain.k - 1)
        ]
    rng = np.random.default_rng([seed, chain.delay, chain.k])
    bang = action_lattice(w_max, 3)  # corners, edge midpoints and 0
    groups[f"{n_starts} random corner/edge/zero tables"] = np.concatenate(
        [np.zeros((1, n_windows, 2)), bang[rng.integers(0, len(bang), (n_starts - 1, n_windows))]]
    )
    return groups


class _StackOptions(TypedDict):
    """solve_stack's search settings (also part of its cache key)."""

    per_axis: int
    scan_per_axis: int
    n_starts: int
    seed: int
    max_rounds: int


def _solve(
    problem: OccupancyProblem,
    delay: int,
    k: int,
    options: _StackOptions,
    lifted: np.ndarray | None,
    progress: bool,
) -> tuple[float, dict[str, np.ndarray]]:
    chain = WindowChain(delay, k)
    lattice = action_lattice(problem.w_max, options["per_axis"])
    bang = action_lattice(problem.w_max, 3)  # corners, edge midpoints and 0
    pairs = bang[np.stack(np.divmod(np.arange(len(bang) ** 2), len(bang)), axis=1)]
    groups = _starts(
        problem, chain, lifted, options["scan_per_axis"], options["n_starts"], options["seed"]
    )
    problem_chain = (problem, chain)
    rounds = options["max_rounds"]
    found: list[_Ascent] = []  # lattice optima, one per start
    for label, tables in groups.items():
        for table in tables:
            found.append(_ascend(_Current(*problem_chain, table), lattice, pairs, rounds, False))
        if progress:
            so_far = max(result.value for result in found)
            print(f"stack_{k} (delay {delay}): {label}: best so far {so_far:.6f}", flush=True)
    # The best distinct lattice optima, polished (L-BFGS-B alternating with lattice sweeps).
    refined = [
        _ascend(_Current(*problem_chain, result.table), lattice, pairs, rounds, True)
        for result in _distinct(found, 2 * _KEEP)
    ]
    best = _distinct(refined, 1)[0]
    checked = comb(3**k, 3) <= _TRIPLES
    while checked:  # no move of 3 windows to corner / edge / 0 actions may gain
        moved = _triple_sweep(_Current(*problem_chain, best.table), bang)
        if moved.value <= best.value + _GAIN:
            break
        best = _ascend(moved, lattice, pairs, rounds, True)
        refined.append(best)
    optima = _distinct(refined, _KEEP)
    best = optima[0]
    residual = _Current(*problem_chain, best.table).residual()
    spacing = 2 * problem.w_max / (options["per_axis"] - 1)
    hits = sum(np.abs(result.table - best.table).max() <= spacing for result in found)
    per_axis = options["per_axis"]
    search = (
        "; ".join(groups)
        + (
            f"; from each of the {len(found)} starts, ascent by single windows on a "
            f"{per_axis}x{per_axis} lattice and pairs of windows on corner/edge/zero actions "
            f"({hits} starts ended within a lattice step of the best table); the best "
            f"{len(refined)} distinct optima polished by L-BFGS-B"
        )
        + ("; no 3-window corner/edge/zero move improves the best" if checked else "")
    )
    if progress:
        print(f"stack_{k} (delay {delay}): {best.value:.6f}; {search}", flush=True)
    return best.value, {
        "k": np.array(k),
        "table": best.table,
        "optima": np.stack([o.table for o in optima]),
        "optima_values": np.array([o.value for o in optima]),
        "converged": np.array(all(r.converged for r in found + refined) and residual < _KKT),
        "iterations": np.array(max(r.rounds for r in found + refined)),
        "residual": np.array(residual),
        "search": np.array(search),
    }


def solve_stack(
    problem: OccupancyProblem,
    delay: int,
    k: int,
    *,
    per_axis: int = 21,
    scan_per_axis: int = 9,
    n_starts: int = 64,
    seed: int = 0,
    max_rounds: int = 50,
    cache: bool | str | Path = True,
    progress: bool = False,
) -> Solution:
    """Best policy on the last k visible tokens at `delay` ("reactive" when k = 1).

    per_axis: the coordinate scan's lattice points per axis (odd keeps 0 on it);
    scan_per_axis: the k = 1 whole-table scan's; n_starts: how many of a scan's best tables,
    and how many seeded random corner/edge/zero tables, start an ascent (plus the lifted
    optima of k - 1); max_rounds: cap on each ascent's rounds (`Solution.converged` says
    whether every ascent stopped because a round gained nothing). The (k - 1) solve runs
    first (cached like this one) and its distinct optima start this one, so the value never
    falls below stack_{k-1}'s.
    """
    if not 1 <= k <= 4:
        raise ValueError(f"stack_k solves k = 1..4, got {k}")
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise ValueError(f"delay must be an int >= 0, got {delay!r}")
    if per_axis < 3 or scan_per_axis < 2 or n_starts < 1 or max_rounds < 1:
        raise ValueError(
            "per_axis must be >= 3, scan_per_axis >= 2, n_starts and max_rounds >= 1, got "
            f"{per_axis}, {scan_per_axis}, {n_starts}, {max_rounds}"
        )
    options: _StackOptions = {
        "per_axis": per_axis,
        "scan_per_axis": scan_per_axis,
        "n_starts": n_starts,
        "seed": seed,
        "max_rounds": max_rounds,
    }
    value, arrays, settings = _cached_stack(problem, delay, k, options, cache, progress)
    name = "reactive" if k == 1 else f"stack_{k}"
    return Solution.from_arrays(name, value, WindowPolicy.from_arrays(arrays), settings, arrays)


def _cached_stack(
    problem: OccupancyProblem,
    delay: int,
    k: int,
    options: _StackOptions,
    cache: bool | str | Path,
    progress: bool,
) -> tuple[float, dict[str, np.ndarray], dict[str, Any]]:
    """(value, arrays, settings) of stack_k, after the (k - 1) solve whose optima it lifts."""
    settings: dict[str, Any] = {
        "solver": "stack",
        "problem": problem.settings(),
        "delay": delay,
        "k": k,
    }
    settings |= options
    lifted = lower = None
    if k > 1:
        lower, lower_arrays, _ = _cached_stack(problem, delay, k - 1, options, cache, progress)
        lifted = lower_arrays["optima"]
    value, arrays = cached(
        resolve_cache(cache),
        settings,
        lambda: _solve(problem, delay, k, options, lifted, progress),
        name=f"{'reactive' if k == 1 else f'stack_{k}'} table (delay {delay})",
        plan=_plan_text(problem, WindowChain(delay, k), options, lifted),
    )
    # The lifted (k - 1) optimum is one of the starts and an ascent never loses value.
    if lower is not None and value < lower - 1e-12:
        raise AssertionError(f"stack_{k} {value} fell below stack_{k - 1} {lower}")
    return value, arrays, settings


def _plan_text(
    problem: OccupancyProblem,
    chain: WindowChain,
    options: _StackOptions,
    lifted: np.ndarray | None,
) -> str:
    """What a stack_k solve will search, for its start log line."""
    n_windows = 3**chain.k
    scan = _scan_choices(problem.w_max, chain.k, options["scan_per_axis"])
    n_starts = options["n_starts"]
    starts = [f"{n_starts} random"]
    if scan is not None:
        starts.insert(0, f"the scan's best {n_starts}")
    if lifted is not None:
        starts.append(f"{len(lifted)} lifted stack_{chain.k - 1} optima")
    scanned = (
        f"global scan of {len(scan[1]) ** n_windows:,} tables"
        if scan is not None
        else "no whole-table scan (too many tables)"
    )
    return (
        f"{n_windows} windows, a {chain.size}-state joint chain; {scanned}; "
        f"ascent from {', '.join(starts)} start tables"
    )


def solve_reactive(problem: OccupancyProblem, delay: int, **options: Any) -> Solution:
    """The best memoryless policy on the newest visible token (stack_k with k = 1)."""
    return solve_stack(problem, delay, 1, **options)

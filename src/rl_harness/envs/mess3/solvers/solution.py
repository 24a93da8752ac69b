"""`Solution`: what every solver returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rl_harness.envs.mess3.solvers.policies import BeliefPolicy, StatePolicy, WindowPolicy


class SolverConvergenceWarning(RuntimeWarning):
    """A solver stopped at its iteration cap before converging (its result is not cached)."""


@dataclass(frozen=True)
class Solution:
    """name ("oracle", "belief_vi", "reactive", "stack_k"), the long-run average reward per
    step `value`, the `policy` that earns it, and the problem and solver settings.

    converged: whether every capped loop stopped by its tolerance, not its cap; iterations:
    the loop count it took (sweeps, policy-iteration steps or ascent rounds; see each
    solver); residual: the final convergence measure (see each solver); search: for the
    window solvers, what the global scan covered ("" elsewhere).
    """

    name: str
    value: float
    policy: StatePolicy | BeliefPolicy | WindowPolicy
    settings: dict[str, Any]
    converged: bool
    iterations: int
    residual: float
    search: str = ""

    @classmethod
    def from_arrays(
        cls,
        name: str,
        value: float,
        policy: StatePolicy | BeliefPolicy | WindowPolicy,
        settings: dict[str, Any],
        arrays: dict[str, np.ndarray],
    ) -> Solution:
        """A Solution from a solver's stored arrays (their convergence fields)."""
        return cls(
            name,
            value,
            policy,
            settings,
            converged=bool(arrays["converged"]),
            iterations=int(arrays["iterations"]),
            residual=float(arrays["residual"]),
            search=str(arrays["search"]) if "search" in arrays else "",
        )

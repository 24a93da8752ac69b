"""`Solution`: what every solver returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rl_harness.envs.mess3.solvers.policies import BeliefPolicy, StatePolicy, WindowPolicy


@dataclass(frozen=True)
class Solution:
    """name ("oracle", "belief_vi", "reactive", "stack_k"), the long-run average reward per
    step `value`, the `policy` that earns it, and the problem and solver settings."""

    name: str
    value: float
    policy: StatePolicy | BeliefPolicy | WindowPolicy
    settings: dict[str, Any]

"""The solvers' policies: plain callables from what an agent (or the oracle) knows to actions.

- `StatePolicy` (oracle): hidden states (n,) -> actions (n, 2); feed it `info["state"]`.
- `BeliefPolicy` (belief_vi): decision beliefs (n, 3) -> actions (n, 2); feed it
  `info["decision_belief"]` of an env with the same observation delay.
- `WindowPolicy` (reactive, stack_k): the last k visible tokens, newest first, (n, k) ints
  (-1 where no token is visible yet) -> actions (n, 2); `visible_tokens(obs, env.layout, k)`
  reads them from the observation (its token window already lags by the delay).

Each has `arrays()` (what the on-disk cache stores) and `from_arrays`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rl_harness.envs.mess3.solvers.simplex import SimplexGrid

if TYPE_CHECKING:
    from rl_harness.envs.hmm.simulator import ObservationLayout


@dataclass(frozen=True)
class StatePolicy:
    """The oracle's action per hidden state: `actions[s]`, shape (3, 2)."""

    actions: np.ndarray

    def __call__(self, states: np.ndarray) -> np.ndarray:
        return self.actions[np.asarray(states, dtype=np.int64)]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"actions": self.actions}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> StatePolicy:
        return cls(arrays["actions"])


@dataclass(frozen=True)
class BeliefPolicy:
    """Greedy actions of the belief MDP at the points of a regular simplex grid (`per_edge`
    intervals per edge), interpolated barycentrically at any belief."""

    per_edge: int
    actions: np.ndarray  # (n_grid_points, 2)

    def __call__(self, beliefs: np.ndarray) -> np.ndarray:
        grid = SimplexGrid(self.per_edge)
        index, weight = grid.locate(np.asarray(beliefs, dtype=np.float64))
        result: np.ndarray = (self.actions[index] * weight[..., None]).sum(axis=-2)
        return result

    def arrays(self) -> dict[str, np.ndarray]:
        return {"per_edge": np.array(self.per_edge), "actions": self.actions}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BeliefPolicy:
        return cls(int(arrays["per_edge"]), arrays["actions"])


@dataclass(frozen=True)
class WindowPolicy:
    """An action per window of the last k visible tokens. `table[index]` with
    index = sum_i tokens[i] * 3**i over the newest-first window; before k tokens are visible
    the missing ones count as token 0 (this touches only an episode's first k + d steps)."""

    k: int
    table: np.ndarray  # (3**k, 2)

    def __call__(self, windows: np.ndarray) -> np.ndarray:
        tokens = np.asarray(windows, dtype=np.int64).reshape(-1, self.k)
        index = (np.maximum(tokens, 0) * 3 ** np.arange(self.k)).sum(axis=1)
        return self.table[index]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"k": np.array(self.k), "table": self.table}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> WindowPolicy:
        return cls(int(arrays["k"]), arrays["table"])


def visible_tokens(observations: np.ndarray, layout: ObservationLayout, k: int) -> np.ndarray:
    """The newest k visible tokens (n, k), newest first, -1 where none yet, read from a batch
    of HMM env observations (n, size) with `env.layout` (token_window must be >= k)."""
    observations = np.asarray(observations)
    one_hot = observations[:, layout.tokens].reshape(len(observations), -1, 3)
    if one_hot.shape[1] < k:
        raise ValueError(f"the observation shows {one_hot.shape[1]} tokens, fewer than k = {k}")
    one_hot = one_hot[:, :k]
    return np.where(one_hot.any(axis=2), one_hot.argmax(axis=2), -1)

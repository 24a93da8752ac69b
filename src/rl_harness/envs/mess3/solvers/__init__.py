"""Exact ceilings of the occupancy-control task (`OccupancyControlTask` on the control chain).

Each solver returns a `Solution`: the long-run average reward per step `value` and the
`policy` that earns it (a callable, see `policies`):

- `solve_oracle(problem)`: the hidden state is known; `StatePolicy(info["state"])`.
- `solve_belief_vi(problem, delay)`: the belief MDP at delay 0 or 1 (simplex grid, barycentric
  interpolation, dense action lattice, continuous polish); `BeliefPolicy(info["decision_belief"])`.
- `solve_reactive(problem, delay)`, `solve_stack(problem, delay, k)`: the best table on the last
  k visible tokens found by a global search (`Solution.search` says what it covered);
  `WindowPolicy(visible_tokens(obs, env.layout, k))`. stack_k >= stack_{k-1} >= reactive.

Every `Solution` says whether its capped loops converged (`converged`, `iterations`,
`residual`); an unconverged one warns once (`SolverConvergenceWarning`) and is not cached.
A solve that runs (not a cache hit) logs one INFO line when it starts and one when it ends
(value, converged, seconds) on the stdlib logger "rl_harness.envs.mess3.solvers".

`OccupancyProblem(alpha, w_max, beta, occupancy_states, action_cost)` holds the parameters and
builds the matching env_config (`problem.env_config(delay)`). Results are cached on disk keyed
by their parameters and SOLVER_VERSION (`cache.py`: $RL_HARNESS_SOLVER_CACHE, else the XDG
cache dir); pass `cache=False` or a directory. Command line:

    python -m rl_harness.envs.mess3.solvers --beta 4 --w-max 5 --delay 1
"""

from rl_harness.envs.mess3.solvers.belief_vi import solve_belief_vi
from rl_harness.envs.mess3.solvers.cache import CACHE_ENV, SOLVER_VERSION, default_cache_dir
from rl_harness.envs.mess3.solvers.oracle import solve_oracle
from rl_harness.envs.mess3.solvers.policies import (
    BeliefPolicy,
    StatePolicy,
    WindowPolicy,
    visible_tokens,
)
from rl_harness.envs.mess3.solvers.problem import OccupancyProblem
from rl_harness.envs.mess3.solvers.solution import Solution, SolverConvergenceWarning
from rl_harness.envs.mess3.solvers.windows import solve_reactive, solve_stack, table_values

__all__ = [
    "CACHE_ENV",
    "BeliefPolicy",
    "SOLVER_VERSION",
    "OccupancyProblem",
    "Solution",
    "SolverConvergenceWarning",
    "StatePolicy",
    "WindowPolicy",
    "default_cache_dir",
    "solve_belief_vi",
    "solve_oracle",
    "solve_reactive",
    "solve_stack",
    "table_values",
    "visible_tokens",
]

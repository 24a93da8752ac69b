"""`python -m rl_harness.envs.mess3.solvers --beta 4 --w-max 5 --delay 1`: print the solvers'
average rewards per step as one JSON object (progress goes to stderr)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from rl_harness.envs.mess3.solvers.belief_vi import solve_belief_vi
from rl_harness.envs.mess3.solvers.oracle import solve_oracle
from rl_harness.envs.mess3.solvers.problem import OccupancyProblem
from rl_harness.envs.mess3.solvers.windows import solve_stack, table_values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rl_harness.envs.mess3.solvers",
        description="Exact ceilings of the MESS3 occupancy-control task, printed as JSON.",
    )
    parser.add_argument("--beta", type=float, default=None, help="KL inverse temperature")
    parser.add_argument("--w-max", type=float, required=True, help="tilt bound")
    parser.add_argument("--delay", type=int, default=1, help="observation delay d")
    parser.add_argument("--alpha", type=float, default=0.85, help="MESS3 emission alpha")
    parser.add_argument("--occupancy-states", type=int, nargs="+", default=[2])
    parser.add_argument("--action-cost", type=float, default=0.0)
    parser.add_argument("--grid", type=int, default=30, help="belief_vi: intervals per edge")
    parser.add_argument(
        "--stack",
        type=int,
        nargs="*",
        default=[2, 3],
        help="stack_k: k values (k = 3 about a minute on 2 cores, k = 4 much longer)",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: XDG cache")
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)
    try:
        problem = OccupancyProblem(
            args.alpha, args.w_max, args.beta, tuple(args.occupancy_states), args.action_cost
        )
        if args.delay < 0 or any(not 1 <= k <= 4 for k in args.stack):
            raise ValueError("--delay must be >= 0 and --stack values in 1..4")
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    cache: bool | Path = False if args.no_cache else (args.cache_dir or True)
    result: dict[str, object] = {"problem": problem.settings() | {"delay": args.delay}}
    solutions = []
    with contextlib.redirect_stdout(sys.stderr):  # progress lines; stdout is the JSON
        solutions.append(solve_oracle(problem, cache=cache))
        if args.delay in (0, 1):
            solutions.append(
                solve_belief_vi(problem, args.delay, per_edge=args.grid, cache=cache, progress=True)
            )
        solutions.append(solve_stack(problem, args.delay, 1, cache=cache, progress=True))
        for k in sorted(set(args.stack) - {1}):
            solutions.append(solve_stack(problem, args.delay, k, cache=cache, progress=True))
    for solution in solutions:
        result[solution.name] = solution.value
    result["passive"] = float(table_values(problem, args.delay, [[[0.0, 0.0]] * 3])[0])
    # Whether each capped loop converged (an unconverged value also warns on stderr), and for
    # the window tables what their search covered (a search, not a proof of optimality).
    result["converged"] = {solution.name: solution.converged for solution in solutions}
    result["search"] = {s.name: s.search for s in solutions if s.search}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""MESS3 occupancy control: env steps/s with continuous actions, and belief_vi's cost.

Run: .venv/bin/python bench/occupancy_control.py [--burst 0.05] [--rounds 30] [--skip-solver]
     [--ceilings-only]

Part 1, env steps/s at 1, 16 and 256 copies, side by side in one run (short bursts in turn,
median of `--rounds`): "per-env sync" and "batched" are built the way RLlib 2.60's env runner
builds them (gymnasium.make_vec + DictInfoToList, gym_env_vectorize_mode "sync" = N HMMEnv
copies stepped one by one, "vector_entry_point" = one HMMVectorEnv); "batched bare" is
HMMVectorEnv.step alone; "raw numpy" tilts the chain, samples states and tokens with bare
NumPy and builds no observation (the limit). Actions: random (a0, a1) in [-6, 6]^2, so some
are clipped. Targets at 256 copies: batched >= 10x per-env, raw numpy within 3x of batched.

Part 2, belief_vi (delay 1 and 0; beta 4, w_max 5, alpha 0.85) at grids of 30, 45 and 60
intervals per edge, no cache: seconds per solve and how far the value moves under
refinement (the target: grid 30 within 1e-3 of the finest, in a few minutes on 2 cores).

Part 3, the ceilings at the study's setting (delay 1, then 0), each solver at its defaults in
an empty temporary cache, one after the other (stack_k reuses the cached stack_{k-1}, so its
seconds are its own): seconds, value, converged, iterations, residual. The window solvers'
global search is the costly part (stack_3: about a minute on 2 quiet cores).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from mess3_bench_env import throughput_table  # noqa: E402  (bench/ is on sys.path)

ENV_CONFIG = {
    "model": "rl_harness.envs.mess3:control_chain_model",
    "model_kwargs": {"alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:OccupancyControlTask",
    "task_kwargs": {"w_max": 5.0, "beta": 4.0},
    "episode_length": 1024,
    "token_window": 8,
    "observation_delay": 1,
}


def env_stepper(env, num_envs: int) -> Callable[[], None]:
    actions = np.random.default_rng(0).uniform(-6, 6, (64, num_envs, 2)).astype(np.float32)
    counter = iter(range(1 << 62))

    def step() -> None:
        env.step(actions[next(counter) % 64])

    return step


def raw_stepper(num_envs: int) -> Callable[[], None]:
    from rl_harness.envs.hmm.sampling import CategoricalTable
    from rl_harness.envs.mess3 import CONTROL_CHAIN_TRANSITION, mess3_emission
    from rl_harness.envs.mess3.control import tilted_transitions

    emission = CategoricalTable(mess3_emission(0.85))
    log_base = np.log(CONTROL_CHAIN_TRANSITION)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-6, 6, (64, num_envs, 2))
    state = np.zeros(num_envs, dtype=np.int64)
    copies = np.arange(num_envs)
    counter = iter(range(1 << 62))

    def step() -> None:
        nonlocal state
        action = np.clip(actions[next(counter) % 64], -5, 5)
        rows = tilted_transitions(CONTROL_CHAIN_TRANSITION, action, log_base)[copies, state]
        uniforms = rng.random((2, num_envs))
        cum = np.cumsum(rows, axis=1)
        state = (uniforms[0][:, None] * cum[:, -1:] >= cum[:, :-1]).sum(axis=1)
        emission.draw(state, uniforms[1])  # the token

    return step


def throughput(burst: float, rounds: int) -> None:
    title = "Occupancy control (Box actions), token_window 8, delay 1"
    throughput_table(title, ENV_CONFIG, env_stepper, raw_stepper, burst, rounds)


def solver_cost() -> None:
    from rl_harness.envs.mess3.solvers import OccupancyProblem, solve_belief_vi

    problem = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0)
    print()
    print("belief_vi, beta 4, w_max 5, alpha 0.85, no cache")
    print(f"{'delay':>6}{'grid':>6}{'seconds':>10}{'value':>12}{'minus finest':>14}")
    for delay in (1, 0):
        rows = []
        for grid in (30, 45, 60):
            start = time.perf_counter()
            value = solve_belief_vi(problem, delay, per_edge=grid, cache=False).value
            rows.append((grid, time.perf_counter() - start, value))
        finest = rows[-1][2]
        for grid, seconds, value in rows:
            print(f"{delay:>6}{grid:>6}{seconds:>10.1f}{value:>12.6f}{value - finest:>14.2e}")
    print("target: grid 30 within 1e-3 of the finest grid (the solver's default is 30)")


def ceilings() -> None:
    import tempfile

    from rl_harness.envs.mess3.solvers import (
        OccupancyProblem,
        solve_belief_vi,
        solve_oracle,
        solve_stack,
    )

    problem = OccupancyProblem(alpha=0.85, w_max=5.0, beta=4.0)
    print()
    print("ceilings, beta 4, w_max 5, alpha 0.85, occupancy {2}, empty cache")
    header = f"{'delay':>6}  {'solver':<10}{'seconds':>9}{'value':>11}"
    print(f"{header}{'converged':>11}{'iterations':>12}{'residual':>11}")
    with tempfile.TemporaryDirectory() as cache:
        for delay in (1, 0):
            solves: list[Callable] = [lambda: solve_oracle(problem, cache=cache)] * (delay == 1)
            solves += [lambda d=delay: solve_belief_vi(problem, d, cache=cache)]
            solves += [
                lambda d=delay, k=k: solve_stack(problem, d, k, cache=cache) for k in (1, 2, 3)
            ]
            for solve in solves:
                start = time.perf_counter()
                solution = solve()
                seconds = time.perf_counter() - start
                print(
                    f"{delay:>6}  {solution.name:<10}{seconds:>9.1f}{solution.value:>11.6f}"
                    f"{solution.converged!s:>11}{solution.iterations:>12}{solution.residual:>11.1e}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=float, default=0.05, help="seconds per burst")
    parser.add_argument("--rounds", type=int, default=30, help="bursts per column")
    parser.add_argument("--skip-solver", action="store_true", help="only the env part")
    parser.add_argument("--ceilings-only", action="store_true", help="only part 3")
    args = parser.parse_args()
    if args.ceilings_only:
        ceilings()
        return
    throughput(args.burst, args.rounds)
    if not args.skip_solver:
        solver_cost()
        ceilings()


if __name__ == "__main__":
    main()

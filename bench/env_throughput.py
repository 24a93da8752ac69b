"""Env steps per second: per-env (RLlib sync vectorization) vs batched HMMVectorEnv vs raw NumPy.

Run: .venv/bin/python bench/env_throughput.py [--burst 0.05] [--rounds 30]

Both envs are built the way RLlib 2.60 builds them (SingleAgentEnvRunner.make_env, i.e.
gymnasium.make_vec + DictInfoToList) with gym_env_vectorize_mode "sync" (N HMMEnv copies
stepped one by one) and "vector_entry_point" (one HMMVectorEnv). The raw loop samples the
same MESS3 hidden states and tokens with bare NumPy and builds no observation: the limit.
All are measured side by side in one run: short bursts in turn, median of `--rounds`.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from mess3_bench_env import MESS3_NEXT_TOKEN, rllib_env  # noqa: E402  (bench/ is on sys.path)

ENV_CONFIG = MESS3_NEXT_TOKEN
SIZES = (1, 16, 256)


def env_stepper(env, num_envs: int) -> Callable[[], None]:
    actions = np.random.default_rng(0).integers(0, 3, (64, num_envs))
    counter = iter(range(1 << 62))

    def step() -> None:
        env.step(actions[next(counter) % 64])

    return step


def raw_stepper(num_envs: int) -> Callable[[], None]:
    from rl_harness.envs.hmm.sampling import CategoricalTable
    from rl_harness.envs.mess3 import mess3_model

    model = mess3_model(0.05, 0.85)
    p = model.transition_matrix
    transition = CategoricalTable(p)
    emission = CategoricalTable(model.token_matrices.transpose(1, 2, 0) / p[..., None])
    rng = np.random.default_rng(0)
    state = np.zeros(num_envs, dtype=np.int64)

    def step() -> None:
        nonlocal state
        uniforms = rng.random((2, num_envs))
        nxt = transition.draw(state, uniforms[0])
        emission.draw(state * 3 + nxt, uniforms[1])  # the token
        state = nxt

    return step


def burst_rate(step: Callable[[], None], num_envs: int, seconds: float) -> float:
    """Env steps per second over one short burst of calls."""
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(10):
            step()
        calls += 10
    return calls * num_envs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=float, default=0.05, help="seconds per burst")
    parser.add_argument("--rounds", type=int, default=30, help="bursts per column")
    args = parser.parse_args()

    from rl_harness.envs.hmm import HMMVectorEnv

    columns = ("per-env sync", "batched", "batched bare", "raw numpy")
    steppers: dict[tuple[str, int], Callable[[], None]] = {}
    for n in SIZES:
        steppers["per-env sync", n] = env_stepper(rllib_env(ENV_CONFIG, n, "sync"), n)
        steppers["batched", n] = env_stepper(rllib_env(ENV_CONFIG, n, "vector_entry_point"), n)
        bare = HMMVectorEnv(n, ENV_CONFIG)
        bare.reset(seed=0)
        steppers["batched bare", n] = env_stepper(bare, n)
        steppers["raw numpy", n] = raw_stepper(n)
    for key, step in steppers.items():  # warm up
        burst_rate(step, key[1], 0.05)
    # Short bursts in turn, many rounds, median per column: on a shared machine every column
    # then sees the same load, which a rate-of over long runs does not guarantee.
    rates: dict[tuple[str, int], list[float]] = {key: [] for key in steppers}
    for _ in range(args.rounds):
        for key, step in steppers.items():
            rates[key].append(burst_rate(step, key[1], args.burst))
    rate = {key: float(np.median(values)) for key, values in rates.items()}

    print(
        f"MESS3 NextTokenTask, token_window 8, no info keys; env steps/s (median of {args.rounds})"
    )
    print("per-env sync / batched: as RLlib's env runner builds them (incl. DictInfoToList);")
    print("batched bare: HMMVectorEnv.step alone; raw numpy: state + token sampling only")
    header = "".join(f"{name:>14}" for name in ("n_envs", *columns))
    header += f"{'batched/per-env':>17}{'raw/bare':>10}{'raw/batched':>13}"
    print(header)
    print("-" * len(header))
    for n in SIZES:
        per_env, batched, bare, raw = (rate[name, n] for name in columns)
        row = f"{n:>14}" + "".join(f"{rate[name, n]:>14,.0f}" for name in columns)
        row += f"{batched / per_env:>16.1f}x{raw / bare:>9.2f}x{raw / batched:>12.2f}x"
        print(row)
    print("targets at 256 envs: batched/per-env >= 10x; raw numpy within 3x of the batched env")


if __name__ == "__main__":
    main()

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
from collections.abc import Callable

import numpy as np

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from mess3_bench_env import MESS3_NEXT_TOKEN, throughput_table  # noqa: E402  (bench/ is on sys.path)

ENV_CONFIG = MESS3_NEXT_TOKEN


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=float, default=0.05, help="seconds per burst")
    parser.add_argument("--rounds", type=int, default=30, help="bursts per column")
    args = parser.parse_args()
    title = "MESS3 NextTokenTask, token_window 8, no info keys"
    throughput_table(title, ENV_CONFIG, env_stepper, raw_stepper, args.burst, args.rounds)


if __name__ == "__main__":
    main()

"""What the env benches share: the MESS3 next-token env (paper setting x = 0.05,
alpha = 0.85) and the vector env as RLlib's env runner builds it."""

import time
from collections.abc import Callable
from typing import Any

import numpy as np

SIZES = (1, 16, 256)  # env copies per column

MESS3_NEXT_TOKEN = {
    "model": "rl_harness.envs.mess3:mess3_model",
    "model_kwargs": {"x": 0.05, "alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
    "task_kwargs": {},
    "episode_length": 128,
    "token_window": 8,
}


def rllib_env(env_config: dict[str, Any], num_envs: int, mode: str):
    """The env an RLlib env runner builds: `mode` "sync" (per-env) or "vector_entry_point"."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    from rl_harness.envs.hmm import ENV_ID

    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=env_config)
        .env_runners(
            num_env_runners=0, num_envs_per_env_runner=num_envs, gym_env_vectorize_mode=mode
        )
    )
    env = SingleAgentEnvRunner(config=config).env
    env.reset(seed=0)
    return env


def burst_rate(step: Callable[[], None], num_envs: int, seconds: float) -> float:
    """Env steps per second over one short burst of calls."""
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(10):
            step()
        calls += 10
    return calls * num_envs / elapsed


def throughput_table(
    title: str,
    env_config: dict[str, Any],
    env_stepper: Callable[[Any, int], Callable[[], None]],
    raw_stepper: Callable[[int], Callable[[], None]],
    burst: float,
    rounds: int,
) -> None:
    """Print env steps/s per column and size, with the ratios the env targets name.

    Short bursts in turn, many rounds, median per column: on a shared machine every column
    then sees the same load, which a rate over long runs does not guarantee.
    """
    from rl_harness.envs.hmm import HMMVectorEnv

    columns = ("per-env sync", "batched", "batched bare", "raw numpy")
    steppers: dict[tuple[str, int], Callable[[], None]] = {}
    for n in SIZES:
        steppers["per-env sync", n] = env_stepper(rllib_env(env_config, n, "sync"), n)
        steppers["batched", n] = env_stepper(rllib_env(env_config, n, "vector_entry_point"), n)
        bare = HMMVectorEnv(n, env_config)
        bare.reset(seed=0)
        steppers["batched bare", n] = env_stepper(bare, n)
        steppers["raw numpy", n] = raw_stepper(n)
    for key, step in steppers.items():  # warm up
        burst_rate(step, key[1], 0.05)
    rates: dict[tuple[str, int], list[float]] = {key: [] for key in steppers}
    for _ in range(rounds):
        for key, step in steppers.items():
            rates[key].append(burst_rate(step, key[1], burst))
    rate = {key: float(np.median(values)) for key, values in rates.items()}

    print(f"{title}; env steps/s (median of {rounds})")
    print("per-env sync / batched: as RLlib's env runner builds them (incl. DictInfoToList);")
    print("batched bare: HMMVectorEnv.step alone; raw numpy: state + token sampling only")
    header = "".join(f"{name:>14}" for name in ("n_envs", *columns))
    header += f"{'batched/per-env':>17}{'raw/bare':>10}{'raw/batched':>13}"
    print(header)
    print("-" * len(header))
    for n in SIZES:
        per_env, batched, bare_rate, raw = (rate[name, n] for name in columns)
        row = f"{n:>14}" + "".join(f"{rate[name, n]:>14,.0f}" for name in columns)
        row += f"{batched / per_env:>16.1f}x{raw / bare_rate:>9.2f}x{raw / batched:>12.2f}x"
        print(row)
    print("targets at 256 envs: batched/per-env >= 10x; raw numpy within 3x of the batched env")

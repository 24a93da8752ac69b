"""PPO env steps/s: the harness runner vs a bare RLlib loop, and module vs module.

Run: .venv/bin/python bench/train_throughput.py [--iterations 6] [--rounds 2]
                                                 [--modules mlp gru transformer]
     .venv/bin/python bench/train_throughput.py --compare modules [--iterations 4]
                                                 [--profile cpu-local|single-gpu]

`--compare modules` (see `compare_modules`) trains MLP, GRU, the stateless window
transformer and the stateful (K/V-cache) transformer at the flagship size on the
continuous occupancy-control task, side by side in one run, and times acting: the
stateful model's one-step cache read vs re-encoding the whole window per env step.

`--envs-per-runner 4 16 32 64` sweeps the number of env copies per runner (a sampling
setting, not a property of the agent): RLlib's per-step connector work is paid per
vector step, so more copies amortize it. Flagship-study sweep (one command, ~5 min):
  .venv/bin/python bench/train_throughput.py --compare modules --iterations 4 --rounds 1 \
      --flagship-modules stateful_transformer --envs-per-runner 4 16 32 64

`--compare harness` (the default) is described below.

For each RLModule the same config is trained twice per round, side by side in one
process: once by `rl_harness.harness.runners.run_algorithm` (metrics.jsonl, progress
line, summary, final checkpoint) and once by a bare `algo.build_algo(); algo.train()`
loop. Rounds alternate which goes first, so drift on a shared machine hits both.

Two numbers per run:
- steady steps/s: the median over iterations 2..N of env steps / seconds between the
  ends of consecutive iterations (each runner's whole per-iteration loop, harness
  bookkeeping included; build and the first, warm-up iteration excluded);
- end-to-end s: build + all iterations + stop (for the harness also its final
  checkpoint and summary);
- loop share: the fraction of iterations 2..N spent outside `algo.train()` (RLlib's
  time_this_iter_s), measured inside each run, so it needs no side-by-side luck.
The ratio is harness / bare, median over rounds; the overhead target is under 3%.

Torch runs with one intra-op thread by default (--torch-threads): on a small shared
machine, more threads than free cores make these tiny matmuls ~10x slower and the
numbers noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from mess3_bench_env import MESS3_NEXT_TOKEN  # noqa: E402  (bench/ is on sys.path)

ENV_CONFIG = MESS3_NEXT_TOKEN | {"info": ["token"]}

# name -> (model_config, env_config overrides). The GRU reads one token per step.
MODULES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "mlp": ({"hidden_sizes": [64, 64]}, {}),
    "gru": ({"hidden_size": 64, "max_seq_len": 16}, {"token_window": 1}),
    "transformer": (
        {"context_len": 8, "feature_dim": 3, "d_model": 32, "num_heads": 2, "num_layers": 2},
        {},
    ),
}


def module_class(name: str) -> type:
    from rl_harness.learners.models import GRUActorCritic, MLPActorCritic, TransformerActorCritic

    return {"mlp": MLPActorCritic, "gru": GRUActorCritic, "transformer": TransformerActorCritic}[
        name
    ]


def ppo_config(name: str, batch_size: int):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl_harness.envs.hmm import ENV_ID

    model_config, env_overrides = MODULES[name]
    return (
        PPOConfig()
        .environment(ENV_ID, env_config=ENV_CONFIG | env_overrides)
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=16,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=batch_size,
            minibatch_size=batch_size // 4,
            num_epochs=2,
            lr=3e-4,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(module_class=module_class(name), model_config=model_config)
        )
    )


@dataclass
class Clock:
    """(time, lifetime env steps, RLlib's own seconds for the iteration) per iteration."""

    ticks: list[tuple[float, int, float]] = field(default_factory=list)

    def tick(self, result: dict[str, Any]) -> None:
        steps = result["env_runners"]["num_env_steps_sampled_lifetime"]
        self.ticks.append((time.perf_counter(), int(steps), float(result["time_this_iter_s"])))

    def steady_steps_per_s(self) -> float:
        """Median over iterations 2..N of steps / seconds (robust to a neighbour's spike)."""
        rates = [
            (s1 - s0) / (t1 - t0)
            for (t0, s0, _), (t1, s1, _) in zip(self.ticks, self.ticks[1:], strict=False)
        ]
        return statistics.median(rates)

    def loop_overhead(self) -> float:
        """Share of iterations 2..N spent outside `algo.train()` (the loop's own work)."""
        wall = self.ticks[-1][0] - self.ticks[0][0]
        inside = sum(seconds for _, _, seconds in self.ticks[1:])
        return max(wall - inside, 0.0) / wall


@dataclass
class Measurement:
    steps_per_s: float
    end_to_end_s: float
    loop_overhead: float


def run_bare(config, seed: int, iterations: int) -> Measurement:
    from rl_harness.harness.hardware import apply_hardware, resolve_profile

    # The same resources and seed that run_algorithm applies for the cpu-local plan.
    config = apply_hardware(config, resolve_profile("cpu-local"))
    config.debugging(seed=seed)
    clock = Clock()
    start = time.perf_counter()
    algo = config.build_algo()
    try:
        for _ in range(iterations):
            clock.tick(algo.train())
    finally:
        algo.stop()
    return Measurement(
        clock.steady_steps_per_s(), time.perf_counter() - start, clock.loop_overhead()
    )


def run_harness(config, seed: int, iterations: int, workdir: Path) -> Measurement:
    from rl_harness.harness.context import make_context
    from rl_harness.harness.runners import run_algorithm

    context = make_context(
        workdir, experiment_module="bench.train_throughput", seed=seed, hardware_profile="cpu-local"
    )
    clock = Clock()
    start = time.perf_counter()
    run_algorithm(config, context, stop=iterations, on_iteration=lambda _algo, r: clock.tick(r))
    return Measurement(
        clock.steady_steps_per_s(), time.perf_counter() - start, clock.loop_overhead()
    )


# The original library's flagship: transformer d_model 96, 3 layers, 4 heads, context 64;
# PPO with 4 envs per runner, 4096-step batches, 4 epochs, on occupancy control
# (delay 1, w_max 5, beta 4, 1024-step episodes). Its agent trained at ~400 env steps/s
# on a 2-core machine; the target here is >= 3x that for the stateful transformer.
FLAGSHIP_ENV = {
    "model": "rl_harness.envs.mess3:control_chain_model",
    "model_kwargs": {"alpha": 0.85},
    "task": "rl_harness.envs.mess3.tasks:OccupancyControlTask",
    "task_kwargs": {"w_max": 5.0, "beta": 4.0},
    "observation_delay": 1,
    "episode_length": 1024,
}
FLAGSHIP_WIDTH = {"d_model": 96, "num_heads": 4, "num_layers": 3}
FLAGSHIP_CONTEXT = 64
# name -> (module class name, model_config, token window the env shows)
FLAGSHIP_MODULES: dict[str, tuple[str, dict[str, Any], int]] = {
    "mlp": ("MLPActorCritic", {"hidden_sizes": [96, 96]}, 1),
    "gru": ("GRUActorCritic", {"hidden_size": 96, "max_seq_len": 64}, 1),
    "transformer": (
        "TransformerActorCritic",
        {"context_len": 16, "feature_dim": 3} | FLAGSHIP_WIDTH,
        16,
    ),
    "stateful_transformer": (
        "StatefulTransformerActorCritic",
        {"context": FLAGSHIP_CONTEXT, "max_seq_len": 64} | FLAGSHIP_WIDTH,
        1,
    ),
}


def flagship_config(name: str, args: argparse.Namespace, envs_per_runner: int):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl_harness.envs.hmm import ENV_ID
    from rl_harness.learners import models

    class_name, model_config, window = FLAGSHIP_MODULES[name]
    config = (
        PPOConfig()
        .environment(ENV_ID, env_config=FLAGSHIP_ENV | {"token_window": window})
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=envs_per_runner,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(
            train_batch_size_per_learner=args.batch_size,
            minibatch_size=args.minibatch_size,
            num_epochs=args.num_epochs,
            lr=3e-4,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=getattr(models, class_name), model_config=model_config
            )
        )
    )
    if class_name == "StatefulTransformerActorCritic":
        # Per-step K/V storage, as the studies train it (the harness refuses the module
        # without it); it installs the env runner's previous-action piece too.
        config.learners(learner_connector=models.prev_action_learner)
        models.store_kv_steps(config)
    return config


def run_plain(config, seed: int, iterations: int, profile: str) -> tuple[float, float]:
    """(steady env steps/s, share of iterations 2..N spent sampling; nan with remote
    env runners)."""
    from rl_harness.harness.hardware import apply_hardware, resolve_profile

    plan = resolve_profile(profile)
    config = apply_hardware(config, plan)
    if plan.num_env_runners == 0:  # cpu-local: keep the flagship's envs in the driver
        config.env_runners(num_envs_per_env_runner=config.num_envs_per_env_runner)
    config.debugging(seed=seed)
    clock = Clock()
    algo = config.build_algo()
    sampling: list[float] = []
    local = algo.env_runner if plan.num_env_runners == 0 else None
    if local is not None:  # time the driver's own sampling (the rest is mostly the update)
        sample = local.sample

        def timed_sample(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return sample(*args, **kwargs)
            finally:
                sampling.append(time.perf_counter() - start)

        local.sample = timed_sample
    try:
        for _ in range(iterations):
            clock.tick(algo.train())
    finally:
        algo.stop()
    wall = clock.ticks[-1][0] - clock.ticks[0][0]
    share = sum(sampling[1:]) / wall if local is not None else float("nan")
    return clock.steady_steps_per_s(), share


def acting_cost(batch: int, repeats: int, device: str) -> tuple[float, float]:
    """Microseconds per env step of acting at the flagship size: (stateful one-step read
    of its K/V cache, stateless re-encode of a `context`-step window)."""
    import gymnasium as gym
    import numpy as np
    import torch
    from ray.rllib.core.columns import Columns

    from rl_harness.learners.models import (
        PREV_ACTIONS,
        StatefulTransformerActorCritic,
        TransformerActorCritic,
    )

    act = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    stateful = StatefulTransformerActorCritic(
        observation_space=gym.spaces.Box(0.0, 1.0, (3,), np.float32),
        action_space=act,
        model_config={"context": FLAGSHIP_CONTEXT, "max_seq_len": 64} | FLAGSHIP_WIDTH,
    ).to(device)
    window = TransformerActorCritic(
        observation_space=gym.spaces.Box(0.0, 1.0, (FLAGSHIP_CONTEXT, 5), np.float32),
        action_space=act,
        model_config=FLAGSHIP_WIDTH,
    ).to(device)
    state = {
        k: torch.as_tensor(np.stack([v] * batch), device=device)
        for k, v in stateful.get_initial_state().items()
    }
    state["n"].fill_(FLAGSHIP_CONTEXT - 1)  # a full cache, as in steady acting
    step = {
        Columns.OBS: torch.rand(batch, 1, 3, device=device),
        PREV_ACTIONS: torch.rand(batch, 1, 2, device=device),
        Columns.STATE_IN: state,
    }
    windowed = {Columns.OBS: torch.rand(batch, FLAGSHIP_CONTEXT, 5, device=device)}

    def timed(fn) -> float:
        for _ in range(10):
            fn()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
            if device != "cpu":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) / repeats / batch * 1e6)
        return statistics.median(times)

    return (
        timed(lambda: stateful.forward_exploration(step)),
        timed(lambda: window.forward_exploration(windowed)),
    )


def compare_modules(args: argparse.Namespace) -> int:
    import ray
    import torch

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    device = "cuda" if args.profile != "cpu-local" and torch.cuda.is_available() else "cpu"
    acting_batch = args.envs_per_runner[0]
    stateful_us, window_us = acting_cost(acting_batch, 200, device)
    print(
        f"acting at the flagship size, batch {acting_batch}, {device}: stateful "
        f"{stateful_us:.0f} us/env step, re-encoding the {FLAGSHIP_CONTEXT}-step window "
        f"{window_us:.0f} us/env step, ratio {window_us / stateful_us:.1f}x",
        flush=True,
    )
    ray.init(include_dashboard=False, log_to_driver=False)
    # (module, envs per runner) -> rates; the env count is a sampling setting: more env
    # copies per runner spread RLlib's per-step connector cost over more env steps.
    runs = [(name, envs) for envs in args.envs_per_runner for name in args.flagship_modules]
    rates: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
    shares: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
    for r in range(args.rounds):
        for name, envs in runs:  # interleaved: drift hits every module
            config = flagship_config(name, args, envs)
            rate, share = run_plain(config, args.seed, args.iterations, args.profile)
            rates[(name, envs)].append(rate)
            shares[(name, envs)].append(share)
            print(
                f"  round {r + 1} {name:<21} {envs:3d} envs {rate:8.0f} env steps/s "
                f"(sampling {share:.0%} of the time)",
                flush=True,
            )
    ray.shutdown()
    print()
    print(
        f"PPO on occupancy control, profile {args.profile}, batch {args.batch_size}, "
        f"minibatch {args.minibatch_size}, {args.num_epochs} epochs, median of {args.rounds} "
        f"rounds (iterations 2..{args.iterations}), torch threads {torch.get_num_threads()}"
    )
    print(f"{'module':<22}{'envs/runner':>12}{'env steps/s':>13}{'sampling':>10}{'vs mlp':>9}")
    for name, envs in runs:
        rate = statistics.median(rates[(name, envs)])
        share = statistics.median(shares[(name, envs)])
        mlp = rates.get(("mlp", envs))
        versus = f"{rate / statistics.median(mlp):8.2f}x" if mlp else ""
        print(f"{name:<22}{envs:>12}{rate:>13.0f}{share:>10.0%}{versus}")
    print("sampling = share of iterations 2..N in the driver's env runner; the rest is mostly")
    print("the learner update (connector pipeline, GAE, epochs x minibatches)")
    for name in args.flagship_modules:
        if len(args.envs_per_runner) > 1:
            best = max(args.envs_per_runner, key=lambda e: statistics.median(rates[(name, e)]))
            print(f"{name}: fastest at {best} envs/runner")
    print(
        "reference: the original library's flagship agent (4 envs/runner), ~400 env steps/s "
        "on 2 cores; the flagship study's CPU budget needs > 1,100"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8, help="training iterations per run")
    parser.add_argument("--rounds", type=int, default=3, help="bare/harness pairs per module")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="train batch (harness 1024, modules 4096)"
    )
    parser.add_argument("--modules", nargs="+", choices=sorted(MODULES), default=list(MODULES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch-threads", type=int, default=1, help="0 keeps torch's default")
    parser.add_argument("--compare", choices=("harness", "modules"), default="harness")
    parser.add_argument(
        "--flagship-modules",
        nargs="+",
        choices=sorted(FLAGSHIP_MODULES),
        default=list(FLAGSHIP_MODULES),
        help="--compare modules: which modules",
    )
    parser.add_argument(
        "--profile",
        choices=("cpu-local", "single-gpu"),
        default="cpu-local",
        help="--compare modules: hardware profile (single-gpu: learner on the GPU, "
        "CPUs - 2 env runners)",
    )
    parser.add_argument(
        "--envs-per-runner",
        type=int,
        nargs="+",
        default=[4],
        help="--compare modules: env copies per runner; several values sweep them",
    )
    parser.add_argument("--minibatch-size", type=int, default=512)
    parser.add_argument("--num-epochs", type=int, default=4)
    args = parser.parse_args(argv)
    if args.iterations < 3:
        parser.error("--iterations must be at least 3 (the first is warm-up)")
    if args.compare == "modules":
        args.batch_size = args.batch_size or 4096
        return compare_modules(args)
    args.batch_size = args.batch_size or 1024

    import ray
    import torch

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    ray.init(include_dashboard=False, log_to_driver=False)
    rows = []
    with tempfile.TemporaryDirectory(prefix="train_throughput-") as tmp:
        for name in args.modules:
            run_bare(ppo_config(name, args.batch_size), args.seed, 2)  # warm-up, not reported
            runs: dict[str, list[Measurement]] = {"bare": [], "harness": []}
            for r in range(args.rounds):
                for which in ("bare", "harness") if r % 2 == 0 else ("harness", "bare"):
                    config = ppo_config(name, args.batch_size)
                    if which == "bare":
                        m = run_bare(config, args.seed, args.iterations)
                    else:
                        m = run_harness(config, args.seed, args.iterations, Path(tmp) / name)
                    runs[which].append(m)
                    print(
                        f"  {name:<11} round {r + 1} {which:<7} {m.steps_per_s:8.0f} steps/s "
                        f"{m.end_to_end_s:6.1f} s end-to-end  loop {m.loop_overhead:.2%}",
                        flush=True,
                    )
            rows.append((name, runs["bare"], runs["harness"]))
    ray.shutdown()

    print()
    print(
        f"PPO on MESS3 next-token, batch {args.batch_size}, {args.iterations} iterations, "
        f"median of {args.rounds} rounds, cpu-local plan, torch threads {torch.get_num_threads()}"
    )
    print(
        f"{'module':<12}{'bare steps/s':>13}{'harness':>9}{'ratio':>7}"
        f"{'bare e2e s':>12}{'harness':>9}{'ratio':>7}{'loop share bare':>17}{'harness':>9}"
    )
    for name, bare, harness in rows:

        def med(runs: list[Measurement], attr: str) -> float:
            return statistics.median(getattr(m, attr) for m in runs)

        b, h = med(bare, "steps_per_s"), med(harness, "steps_per_s")
        be, he = med(bare, "end_to_end_s"), med(harness, "end_to_end_s")
        bl, hl = med(bare, "loop_overhead"), med(harness, "loop_overhead")
        print(
            f"{name:<12}{b:>13.0f}{h:>9.0f}{h / b:>7.3f}{be:>12.1f}{he:>9.1f}{he / be:>7.3f}"
            f"{bl:>17.2%}{hl:>9.2%}"
        )
    print(
        "ratio = harness / bare; loop share = time between iterations outside algo.train() "
        "(harness: metrics row, progress line, hook)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

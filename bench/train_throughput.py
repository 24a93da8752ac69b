"""PPO env steps/s on the MESS3 next-token task: the harness runner vs a bare RLlib loop.

Run: .venv/bin/python bench/train_throughput.py [--iterations 6] [--rounds 2]
                                                 [--modules mlp gru transformer]

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
    "transformer": ({"context_len": 8, "d_model": 32, "num_heads": 2, "num_layers": 2}, {}),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8, help="training iterations per run")
    parser.add_argument("--rounds", type=int, default=3, help="bare/harness pairs per module")
    parser.add_argument("--batch-size", type=int, default=1024, help="train batch (env steps)")
    parser.add_argument("--modules", nargs="+", choices=sorted(MODULES), default=list(MODULES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch-threads", type=int, default=1, help="0 keeps torch's default")
    args = parser.parse_args(argv)
    if args.iterations < 3:
        parser.error("--iterations must be at least 3 (the first is warm-up)")

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

"""The token-guess study's training speed: per-window vs prefix-shared learner forward.

Trains the study's own leaves (experiments.mess3_token_guess.ppo and .supervised, their
`build_config` at the CPU budget: 32 envs, 32,768-step batches, minibatch 4,096, 6 epochs,
the paper's transformer) through the harness (`run_algorithm`, cpu-local plan, torch on one
thread as the study runs it: OMP_NUM_THREADS=1), changing only the model_config key
"train_forward" (per_window: every window in full, the library before issue 38;
prefix_shared: each distinct window prefix of a minibatch once, the same function) and,
for the "learner-2t" variant, torch on 2 threads during the learner update only (sampling
runs in the same process and never overlaps the learner with the cpu-local plan, so the
second core is otherwise idle then); "torch-default": no OMP_NUM_THREADS, torch's own
thread count in every phase (what a plain run alone gets).

Every run is its own process (a fresh Ray, its own peak memory); within a round the
variants of a leaf run back to back, and the order alternates round by round, so drift on
a shared machine hits both.

    .venv/bin/python bench/token_guess_throughput.py                 # ~15 min on 2 quiet cores
    .venv/bin/python bench/token_guess_throughput.py --iterations 4 --rounds 2
    .venv/bin/python bench/token_guess_throughput.py --leaves ppo \
        --variants per_window prefix_shared
    # issue 53: the iteration split with RLlib's per-item acting pieces and the batched ones
    .venv/bin/python bench/token_guess_throughput.py --leaves ppo --iterations 4 --rounds 2 \
        --variants prefix_shared-rllib-acting prefix_shared

Numbers per run (iteration 1 is warm-up and excluded): tokens/s = median over iterations
2..N of env steps / seconds between iteration ends (harness bookkeeping included; no
checkpoints or probes: those come after training in the study); learner s = median time in
`learner_group.update` (learner connector with the value pass for GAE, all SGD epochs);
sampling s = median time in the local env runner's `sample`; other s = iteration minus
both; learner CPU s and sampling CPU s: the driver's process CPU seconds (all its threads)
in those calls, a figure a busy machine changes far less than wall time; peak RSS of the
process tree (driver + Ray's processes, polled every 0.2 s). The ratio is tokens/s over
the first variant's run (default per_window) of the same leaf and round.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flagship_throughput import PeakRSS, Timed, gib  # bench/ is on sys.path

VARIANTS = {
    # name -> (train_forward, torch threads during the learner update)
    "per_window": ("per_window", 1),
    "prefix_shared": ("prefix_shared", 1),
    "prefix_shared-learner-2t": ("prefix_shared", 2),
    "per_window-learner-2t": ("per_window", 2),
    # A plain run alone (no OMP_NUM_THREADS): torch's default threads in every phase.
    "prefix_shared-torch-default": ("prefix_shared", 0),
    # Acting through RLlib's default per-item connector pieces (the recipes before issue
    # 53's batched acting, `batched_acting`): the sampling split before and after.
    "prefix_shared-rllib-acting": ("prefix_shared", 1),
}
TODAY_TOKENS_PER_S = 633  # ppo seed 0 alone at the CPU budget, per_window (study README)


@dataclasses.dataclass(frozen=True)
class Spec:
    leaf: str = "ppo"  # ppo | supervised
    variant: str = "prefix_shared"
    iterations: int = 3
    seed: int = 0


def child(spec: Spec) -> dict[str, Any]:
    import importlib

    import torch
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    train_forward, learner_threads = VARIANTS[spec.variant]
    recipe = importlib.import_module(f"experiments.mess3_token_guess.{spec.leaf}.experiment")
    plan = dataclasses.replace(recipe.CPU, iterations=spec.iterations)
    config = recipe.build_config(plan)
    # `config.rl_module_spec` is a fresh merged copy on every read: set it through rl_module.
    module_spec = config.rl_module_spec
    config.rl_module(
        rl_module_spec=RLModuleSpec(
            module_class=module_spec.module_class,
            model_config=module_spec.model_config | {"train_forward": train_forward},
        )
    )
    assert config.rl_module_spec.model_config["train_forward"] == train_forward
    if spec.variant.endswith("-rllib-acting"):  # RLlib's default acting pipelines
        config.env_runners(
            env_to_module_connector=None,
            module_to_env_connector=None,
            add_default_connectors_to_env_to_module_pipeline=True,
            add_default_connectors_to_module_to_env_pipeline=True,
        )
    ticks: list[tuple[float, int]] = []
    timers: dict[str, Timed] = {}
    memory = PeakRSS()

    def on_iteration(algo: Any, result: dict[str, Any]) -> None:
        ticks.append((time.perf_counter(), int(result["num_env_steps_sampled_lifetime"])))
        if not timers:  # from iteration 2 on (the first is warm-up)
            module = algo.learner_group._learner.module["default_policy"]
            assert module.train_forward == train_forward, module.train_forward
            update = algo.learner_group.update
            if learner_threads > 1:

                def threaded(*args: Any, **kwargs: Any) -> Any:
                    torch.set_num_threads(learner_threads)
                    try:
                        return update(*args, **kwargs)
                    finally:
                        torch.set_num_threads(1)

                algo.learner_group.update = threaded
            timers["learner"] = Timed(algo.learner_group, "update")
            timers["sampling"] = Timed(algo.env_runner, "sample")
            timers["learner_cpu"] = Timed(algo.learner_group, "update", time.process_time)
            timers["sampling_cpu"] = Timed(algo.env_runner, "sample", time.process_time)

    from rl_harness.harness.context import make_context
    from rl_harness.harness.runners import run_algorithm

    with memory, tempfile.TemporaryDirectory(prefix="token-guess-bench-") as tmp:
        context = make_context(
            Path(tmp), experiment_module="bench.token_guess_throughput", seed=spec.seed
        )
        run_algorithm(config, context, stop=spec.iterations, on_iteration=on_iteration)
    seconds = [t1 - t0 for (t0, _), (t1, _) in zip(ticks, ticks[1:], strict=False)]
    rates = [(s1 - s0) / (t1 - t0) for (t0, s0), (t1, s1) in zip(ticks, ticks[1:], strict=False)]
    learner, sampling = timers["learner"].seconds, timers["sampling"].seconds
    iteration_s = statistics.median(seconds)
    return {
        "spec": dataclasses.asdict(spec),
        "tokens_per_s": statistics.median(rates),
        "iteration_s": iteration_s,
        "learner_s": statistics.median(learner),
        "sampling_s": statistics.median(sampling),
        "other_s": iteration_s - statistics.median(learner) - statistics.median(sampling),
        "learner_cpu_s": statistics.median(timers["learner_cpu"].seconds),
        "sampling_cpu_s": statistics.median(timers["sampling_cpu"].seconds),
        "tree_peak_rss": memory.tree_peak,
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
    }


def run_child(spec: Spec, timeout: float) -> dict[str, Any]:
    # The study's torch setting: one intra-op thread (recorded in its manifests); the
    # torch-default variant leaves torch's own choice (every core).
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    if VARIANTS[spec.variant][1] == 0:
        env.pop("OMP_NUM_THREADS")
        env.pop("MKL_NUM_THREADS", None)
    command = [sys.executable, str(Path(__file__).resolve()), "child", json.dumps(spec.__dict__)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"spec": dataclasses.asdict(spec), "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    return {"spec": dataclasses.asdict(spec), "error": f"exit {done.returncode}: {tail}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaves", nargs="+", default=["ppo", "supervised"])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["per_window", "prefix_shared", "prefix_shared-learner-2t"],
        choices=sorted(VARIANTS),
    )
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=2400.0)
    parser.add_argument("--json", type=Path, help="also write every result here")
    args = parser.parse_args()
    if args.iterations < 2:
        parser.error("--iterations must be >= 2 (iteration 1 is warm-up)")
    results = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for round_index in range(args.rounds):
        for leaf_index, leaf in enumerate(args.leaves):
            order = list(args.variants)
            if (round_index + leaf_index) % 2:
                order.reverse()
            for variant in order:
                spec = Spec(leaf, variant, args.iterations)
                started = time.perf_counter()
                result = run_child(spec, args.timeout) | {"round": round_index}
                results.append(result)
                took = time.perf_counter() - started
                brief = {k: v for k, v in result.items() if k not in ("spec", "round")}
                print(f"  round {round_index} {leaf} {variant}: {took:.0f} s {brief}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print()
    header = (
        f"{'leaf':<10} {'variant':<26} {'round':>5} {'tokens/s':>9} {'ratio':>6} "
        f"{'iter s':>7} {'learner s':>9} {'sampling s':>10} {'other s':>7} "
        f"{'learner CPU s':>13} {'sampling CPU s':>14} {'tree RSS GiB':>12} {'load (1 min)':>12}"
    )
    print(header)
    for result in results:
        spec = result["spec"]
        if "error" in result:
            print(
                f"{spec['leaf']:<10} {spec['variant']:<26} {result['round']:>5}  {result['error']}"
            )
            continue
        base = [
            r
            for r in results
            if r["spec"]["leaf"] == spec["leaf"]
            and r["round"] == result["round"]
            and r["spec"]["variant"] == args.variants[0]  # ratio: over the first variant
            and "error" not in r
        ]
        ratio = f"{result['tokens_per_s'] / base[0]['tokens_per_s']:.2f}" if base else "-"
        print(
            f"{spec['leaf']:<10} {spec['variant']:<26} {result['round']:>5} "
            f"{result['tokens_per_s']:>9.0f} {ratio:>6} {result['iteration_s']:>7.2f} "
            f"{result['learner_s']:>9.2f} {result['sampling_s']:>10.2f} "
            f"{result['other_s']:>7.2f} {result['learner_cpu_s']:>13.2f} "
            f"{result['sampling_cpu_s']:>14.2f} {gib(result['tree_peak_rss']):>12} "
            f"{result['load_average'][0]:>12.1f}"
        )
    print(f"\n(today's study: {TODAY_TOKENS_PER_S} tokens/s for ppo at the CPU budget; target 5x)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        print("RESULT " + json.dumps(child(Spec(**json.loads(sys.argv[2])))), flush=True)
    else:
        main()

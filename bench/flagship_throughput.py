"""The flagship agent's PPO training: env steps/s, learner and sampling time, peak memory.

The config is the study's own (experiments.mess3_belief_geometry.reward_only: stateful
transformer width 96, 3 layers, 4 heads, context 64, 64-step chunks; occupancy control;
PPO at its CPU budget: 32 envs per runner, 32,768-step batches, minibatch 4,096, 6 epochs),
changed only where a command below says so. Every run is its own process (a fresh Ray,
its own peak memory), interleaved with the runs it is compared to, round after round.

Paths (what stores the agent's K/V cache):
  baseline     the library at --baseline-ref (default 05ee5fe, before issue 26), unpacked
               with `git archive` into a temporary folder: today's numbers, side by side
  whole-cache  this checkout, RLlib storing the whole cache at every step (the default
               without store_kv_steps)
  kv-steps     this checkout with store_kv_steps(config): each step's new key/value only
               (acting through the batched connectors, GAE's value pass without autograd)
  rllib-acting this checkout's kv-steps with the previous implementation of both: RLlib's
               per-item acting pieces (`batched=False`) and RLlib's GAE piece (autograd on)

Runners: bare = `config.build_algo()` + `algo.train()` after the cpu-local plan and seed
(what run_algorithm applies); harness = rl_harness.harness.runners.run_algorithm.

Commands (`.venv/bin/python bench/flagship_throughput.py <command> --help` for options):

  compare          baseline vs kv-steps (and whole-cache with --paths), bare and harness.
                   ~12 min on 2 quiet cores at the defaults (4 iterations, 1 round).
                   Issue 53's figure (the library at af63730 vs this one, through the
                   harness, 2 rounds in the order old new new old; ~7 min quiet):
    .venv/bin/python bench/flagship_throughput.py compare --runners harness --rounds 2
  bare-vs-harness  what makes a bare loop slower or faster than the harness: torch threads,
                   who starts Ray, the harness itself (kv-steps path unless --paths).
    .venv/bin/python bench/flagship_throughput.py bare-vs-harness
  runners          sampling in the driver vs 1 or 2 remote env runners (32 envs in all, and
                   32 per runner), kv-steps, bare.
    .venv/bin/python bench/flagship_throughput.py runners
  compile-learner  eager vs RLlib's torch_compile_learner (torch.compile of the learner's
                   forward_train, inductor), kv-steps, bare.
    .venv/bin/python bench/flagship_throughput.py compile-learner
  scale            envs per runner (4 16 32 64), batch size (8K 16K 32K 64K; minibatch an
                   eighth, as in the study), env runners (0 1 2), kv-steps, bare; prints
                   the FULL budget's projected wall time on this machine.
    .venv/bin/python bench/flagship_throughput.py scale

Numbers per run: steady env steps/s = median over iterations 2..N of steps / seconds between
iteration ends; learner s = median time in `learner_group.update` (learner connector, GAE,
SGD); sampling s = median time in the local env runner's `sample` (with remote env runners:
iteration time minus learner time); peak RSS of the driver (ru_maxrss) and of the whole
process tree (driver + Ray's processes and workers, polled every 0.2 s).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The library before issue 53 (batched acting, GAE without autograd); 05ee5fe: before issue
# 26 (whole cache stored per step).
BASELINE_REF = "af63730"
FULL_ITERATIONS = 306  # the study's FULL budget: 306 x 32,768 steps, 64 envs per runner
FULL_ENVS = 64
CPU_ITERATIONS = 62


@dataclasses.dataclass(frozen=True)
class Spec:
    """One child run."""

    path: str = "kv-steps"  # baseline | whole-cache | kv-steps
    runner: str = "bare"  # bare | harness
    batch: int = 32_768
    minibatch: int = 4096
    epochs: int = 6
    envs: int = 32
    env_runners: int = 0
    iterations: int = 4
    seed: int = 0
    torch_threads: int = 0  # 0: torch's default
    ray_init: str = "explicit"  # explicit (like the harness) | rllib (none before build_algo)
    float_precision: str = "highest"  # torch.set_float32_matmul_precision
    compile_learner: bool = False  # RLlib's config.framework(torch_compile_learner=True)

    def label(self) -> str:
        parts = [self.path, self.runner]
        if self.torch_threads:
            parts.append(f"threads={self.torch_threads}")
        if self.ray_init != "explicit":
            parts.append(f"ray_init={self.ray_init}")
        if self.float_precision != "highest":
            parts.append(f"matmul={self.float_precision}")
        if self.compile_learner:
            parts.append("compile-learner")
        return " ".join(parts)


# ---------------------------------------------------------------------------- the child


class PeakRSS:
    """Polls the resident memory of this process and all its descendants."""

    def __init__(self, period: float = 0.2) -> None:
        self.period = period
        self.tree_peak = 0
        self.others_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    @staticmethod
    def _descendants(root: int) -> list[int]:
        parents: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
        found, todo = [], [root]
        while todo:
            for child in parents.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        return found

    @staticmethod
    def _cpu(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return 0.0

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of this process and its live descendants so far."""
        me = os.times()
        return me.user + me.system + sum(self._cpu(p) for p in self._descendants(os.getpid()))

    def sample(self) -> None:
        me = os.getpid()
        others = sum(self._rss(pid) for pid in self._descendants(me))
        self.others_peak = max(self.others_peak, others)
        self.tree_peak = max(self.tree_peak, others + self._rss(me))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def previous_kv_acting(config: Any) -> None:
    """The flagship's acting and GAE before issue 53 (the library at af63730), on a config
    with store_kv_steps: RLlib's per-item acting pieces around the K/V steps (`batched=False`,
    each piece timed by RLlib's pipeline: `untimed=False`)
    and RLlib's GAE piece with autograd on (training_split.py's "previous" path too)."""
    import functools

    from rl_harness.learners.connectors.kv_cache import (
        KVCachePPOLearner,
        kv_cache_env_to_module,
        kv_steps_module_to_env,
    )

    class AutogradGAELearner(KVCachePPOLearner):
        gae_without_autograd = False

    config.env_runners(
        env_to_module_connector=functools.partial(
            kv_cache_env_to_module, batched=False, untimed=False
        ),
        module_to_env_connector=functools.partial(
            kv_steps_module_to_env,
            normalize_actions=config.normalize_actions,
            clip_actions=config.clip_actions,
            batched=False,
            untimed=False,
        ),
    )
    config.learners(learner_class=AutogradGAELearner)


def study_config(spec: Spec):
    from experiments.mess3_belief_geometry.reward_only import experiment

    plan = dataclasses.replace(
        experiment.CPU,
        iterations=spec.iterations,
        train_batch=spec.batch,
        minibatch=spec.minibatch,
        num_epochs=spec.epochs,
        num_envs=spec.envs,
    )
    config = experiment.build_config(plan)
    if spec.path == "whole-cache":
        # The study installs store_kv_steps (since 0076309); take it out again, so RLlib
        # stores the whole cache at every step, as before issue 26.
        from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

        config.learners(learner_class=PPOTorchLearner)
        config.env_runners(
            env_to_module_connector=None,
            module_to_env_connector=None,
            add_default_connectors_to_env_to_module_pipeline=True,
        )
        # Chosen on purpose: the module's opt-out of the harness's store_kv_steps refusal.
        model_config = {**config.rl_module_spec.model_config, "whole_cache_per_step": True}
        config.rl_module(model_config=model_config)
    elif spec.path in ("kv-steps", "rllib-acting"):
        from rl_harness.learners.models import store_kv_steps

        store_kv_steps(config)  # a no-op where the study already installs it
    if spec.path == "rllib-acting":
        previous_kv_acting(config)
    if spec.compile_learner:
        # RLlib's documented learner option: torch.compile (inductor) of the module's
        # forward_train on the learner; acting stays eager.
        config.framework(torch_compile_learner=True)
    return config


class Timed:
    """Wraps a bound method; keeps the seconds of each call on `clock` (wall by default;
    `time.process_time`: the process's CPU seconds, all threads)."""

    def __init__(
        self, owner: Any, name: str, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.seconds: list[float] = []
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds.append(clock() - start)

        setattr(owner, name, timed)


def child(spec: Spec) -> dict[str, Any]:
    import torch

    if spec.torch_threads:
        torch.set_num_threads(spec.torch_threads)
    torch.set_float32_matmul_precision(spec.float_precision)
    config = study_config(spec)
    ticks: list[tuple[float, int]] = []
    cpu: list[float] = []
    timers: dict[str, Timed] = {}
    memory = PeakRSS()

    def on_iteration(algo: Any, result: dict[str, Any]) -> None:
        ticks.append((time.perf_counter(), int(result["num_env_steps_sampled_lifetime"])))
        cpu.append(memory.cpu_seconds())
        if not timers:  # from iteration 2 on (the first is warm-up)
            timers["learner"] = Timed(algo.learner_group, "update")
            if algo.env_runner is not None and spec.env_runners == 0:
                timers["sampling"] = Timed(algo.env_runner, "sample")

    start = time.perf_counter()
    with memory:
        if spec.runner == "harness":
            from rl_harness.harness.context import make_context
            from rl_harness.harness.runners import run_algorithm

            if spec.env_runners:
                raise SystemExit("harness runs use the cpu-local plan (env_runners 0)")
            with tempfile.TemporaryDirectory(prefix="flagship-bench-") as tmp:
                context = make_context(
                    Path(tmp), experiment_module="bench.flagship_throughput", seed=spec.seed
                )
                run_algorithm(config, context, stop=spec.iterations, on_iteration=on_iteration)
        else:
            from rl_harness.harness.hardware import apply_hardware, resolve_profile

            config = apply_hardware(config, resolve_profile("cpu-local"))
            config.env_runners(num_env_runners=spec.env_runners)
            config.debugging(seed=spec.seed)
            if spec.ray_init == "explicit":
                import ray

                ray.init(include_dashboard=False, log_to_driver=False)
            algo = config.build_algo()
            try:
                for _ in range(spec.iterations):
                    on_iteration(algo, algo.train())
            finally:
                algo.stop()
    rates = [(s1 - s0) / (t1 - t0) for (t0, s0), (t1, s1) in zip(ticks, ticks[1:], strict=False)]
    seconds = [t1 - t0 for (t0, _), (t1, _) in zip(ticks, ticks[1:], strict=False)]
    cpu_rates = [  # env steps per CPU second: a figure that load changes far less
        (s1 - s0) / (c1 - c0)
        for (_, s0), (_, s1), c0, c1 in zip(ticks, ticks[1:], cpu, cpu[1:], strict=False)
    ]
    learner = timers["learner"].seconds if "learner" in timers else []
    sampling = timers["sampling"].seconds if "sampling" in timers else []
    if not sampling and learner:  # remote env runners: the rest of each iteration
        sampling = [max(s - u, 0.0) for s, u in zip(seconds, learner, strict=False)]
    return {
        "spec": dataclasses.asdict(spec),
        "steps_per_s": statistics.median(rates) if rates else float("nan"),
        "iteration_s": statistics.median(seconds) if seconds else float("nan"),
        "steps_per_cpu_s": statistics.median(cpu_rates) if cpu_rates else float("nan"),
        "learner_s": statistics.median(learner) if learner else float("nan"),
        "sampling_s": statistics.median(sampling) if sampling else float("nan"),
        "first_iteration_s": ticks[0][0] - start if ticks else float("nan"),
        "driver_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "others_peak_rss": memory.others_peak,
        "tree_peak_rss": memory.tree_peak,
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
    }


# ---------------------------------------------------------------------------- the parent


def baseline_tree(ref: str, keep: list[tempfile.TemporaryDirectory]) -> Path:
    """The library and the experiment repo at `ref`, unpacked (no git worktree)."""
    folder = tempfile.TemporaryDirectory(prefix=f"flagship-baseline-{ref}-")
    keep.append(folder)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, "src", "examples/rl-experiments"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", folder.name], input=archive, check=True)
    return Path(folder.name)


def run_child(spec: Spec, baseline: Path | None, timeout: float) -> dict[str, Any]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    if spec.path == "baseline":
        assert baseline is not None
        roots = [baseline / "src", baseline / "examples" / "rl-experiments"]
        env["PYTHONPATH"] = os.pathsep.join([*map(str, roots), env.get("PYTHONPATH", "")])
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


def gib(n: float) -> str:
    return f"{n / 2**30:.2f}"


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else float("nan")


def run_table(
    specs: list[Spec], args: argparse.Namespace, title: str, reference: Spec | None = None
) -> dict[Spec, list[dict[str, Any]]]:
    keep: list[tempfile.TemporaryDirectory] = []
    baseline = (
        baseline_tree(args.baseline_ref, keep) if any(s.path == "baseline" for s in specs) else None
    )
    results: dict[Spec, list[dict[str, Any]]] = {spec: [] for spec in specs}
    for r in range(args.rounds):
        order = specs if r % 2 == 0 else list(reversed(specs))  # drift hits every row
        for spec in order:
            result = run_child(spec, baseline, args.timeout)
            results[spec].append(result)
            if "error" in result:
                print(f"  round {r + 1} {spec.label():<34} ERROR {result['error']}", flush=True)
                continue
            print(
                f"  round {r + 1} {spec.label():<34} envs {spec.envs:3d} batch {spec.batch:6d} "
                f"runners {spec.env_runners} {result['steps_per_s']:7.0f} steps/s "
                f"({result['steps_per_cpu_s']:5.0f} per CPU s)  learner "
                f"{result['learner_s']:6.1f} s  sampling {result['sampling_s']:6.1f} s  RSS "
                f"driver {gib(result['driver_peak_rss'])} GiB tree "
                f"{gib(result['tree_peak_rss'])} GiB  load {result['load_average'][0]:.1f}",
                flush=True,
            )
    for folder in keep:
        folder.cleanup()
    print()
    print(title)
    print(
        f"{'run':<36}{'envs':>5}{'batch':>7}{'runners':>8}{'steps/s':>9}{'ratio':>7}{'/CPU s':>7}"
        f"{'iter s':>8}{'learner s':>10}{'sampling s':>11}{'driver GiB':>11}{'tree GiB':>9}"
        f"{'load':>6}"
    )
    ref_rate = median_of(results[reference], "steps_per_s") if reference in results else None
    for spec, runs in results.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            print(f"{spec.label():<36} failed: {runs[0].get('error')}")
            continue
        rate = median_of(ok, "steps_per_s")
        ratio = f"{rate / ref_rate:7.2f}" if ref_rate else f"{'':7}"
        loads = [r["load_average"][0] for r in ok]
        print(
            f"{spec.label():<36}{spec.envs:>5}{spec.batch:>7}{spec.env_runners:>8}{rate:>9.0f}"
            f"{ratio}{median_of(ok, 'steps_per_cpu_s'):>7.0f}"
            f"{median_of(ok, 'iteration_s'):>8.1f}{median_of(ok, 'learner_s'):>10.1f}"
            f"{median_of(ok, 'sampling_s'):>11.1f}{gib(median_of(ok, 'driver_peak_rss')):>11}"
            f"{gib(median_of(ok, 'tree_peak_rss')):>9}{max(loads):>6.1f}"
        )
    print(
        f"median of {args.rounds} round(s), iterations 2..{specs[0].iterations}; ratio = "
        "steps/s / the first row's; /CPU s = env steps per CPU second of the whole process "
        "tree (less sensitive to other load; torch's spinning threads count); "
        "load = the highest 1-min load average seen at a run's end "
        f"(over {os.cpu_count()} cores: a figure taken at load > 0.5 was taken under load)"
    )
    if args.json:
        with open(args.json, "a", encoding="utf-8") as handle:
            for runs in results.values():
                for run in runs:
                    handle.write(json.dumps(run) + "\n")
    return results


def base_spec(args: argparse.Namespace, **changes: Any) -> Spec:
    return dataclasses.replace(
        Spec(
            batch=args.batch,
            minibatch=args.minibatch or args.batch // 8,
            epochs=args.epochs,
            envs=args.envs,
            iterations=args.iterations,
            seed=args.seed,
        ),
        **changes,
    )


def compare(args: argparse.Namespace) -> None:
    specs = [
        base_spec(args, path=path, runner=runner) for path in args.paths for runner in args.runners
    ]
    run_table(specs, args, "old vs new, the study's settings", reference=specs[0])


def bare_vs_harness(args: argparse.Namespace) -> None:
    path = args.paths[-1]
    specs = [
        base_spec(args, path=path, runner="harness"),
        base_spec(args, path=path, runner="bare"),
        base_spec(args, path=path, runner="bare", ray_init="rllib"),
        base_spec(args, path=path, runner="bare", torch_threads=1),
        base_spec(args, path=path, runner="harness", torch_threads=1),
    ]
    run_table(specs, args, "bare vs harness: what differs", reference=specs[0])


def scale(args: argparse.Namespace) -> None:
    path = args.paths[-1]
    specs = [base_spec(args, path=path, envs=envs) for envs in args.envs_sweep]
    specs += [
        base_spec(args, path=path, batch=batch, minibatch=batch // 8)
        for batch in args.batch_sweep
        if batch != args.batch
    ]
    specs += [base_spec(args, path=path, env_runners=n) for n in args.runners_sweep if n]
    results = run_table(specs, args, "scale: envs per runner, batch size, env runners")
    full = [s for s in specs if s.envs == FULL_ENVS and s.batch == 32_768 and not s.env_runners]
    if full and results[full[0]] and "error" not in results[full[0]][0]:
        rate = median_of(results[full[0]], "steps_per_s")
        hours = FULL_ITERATIONS * 32_768 / rate / 3600
        print(
            f"FULL budget ({FULL_ITERATIONS} x 32,768 steps, {FULL_ENVS} envs per runner) on "
            f"this machine at {rate:.0f} steps/s: {hours:.1f} h of training "
            f"(CPU budget, {CPU_ITERATIONS} iterations at 32 envs: see the 32-envs row)"
        )


def runners(args: argparse.Namespace) -> None:
    """Sampling in the driver against remote env runners (bare: the harness's cpu-local plan
    samples in the driver): the same 32 envs in all on 2 runners, and 32 per runner."""
    path = args.paths[-1]
    specs = [
        base_spec(args, path=path),
        base_spec(args, path=path, env_runners=1),
        base_spec(args, path=path, env_runners=2, envs=args.envs // 2),
        base_spec(args, path=path, env_runners=2),
    ]
    run_table(specs, args, "env runners: in the driver (0) or remote", reference=specs[0])


def compile_learner(args: argparse.Namespace) -> None:
    """The learner's forward_train compiled by torch.compile (RLlib's torch_compile_learner,
    inductor) against eager, kv-steps, bare. The warm-up iteration holds the compile time."""
    path = args.paths[-1]
    specs = [base_spec(args, path=path), base_spec(args, path=path, compile_learner=True)]
    run_table(specs, args, "learner forward_train: eager vs torch.compile", reference=specs[0])


def float_precision(args: argparse.Namespace) -> None:
    path = args.paths[-1]
    specs = [base_spec(args, path=path)]
    specs += [base_spec(args, path=path, float_precision=p) for p in ("high", "medium")]
    specs += [base_spec(args, path=path, torch_threads=1)]
    run_table(specs, args, "speed-for-exactness options (default first)", reference=specs[0])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        spec = Spec(**json.loads(argv[1]))
        print("RESULT " + json.dumps(child(spec)), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        choices=(
            "compare",
            "bare-vs-harness",
            "scale",
            "runners",
            "float-precision",
            "compile-learner",
        ),
    )
    parser.add_argument("--iterations", type=int, default=4, help="per run; the first is warm-up")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32_768)
    parser.add_argument("--minibatch", type=int, default=0, help="default: batch / 8")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--envs", type=int, default=32, help="env copies per runner")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--paths",
        nargs="+",
        choices=("baseline", "whole-cache", "kv-steps", "rllib-acting"),
        default=["baseline", "kv-steps"],
        help="compare: which paths; other commands use the last",
    )
    parser.add_argument(
        "--runners", nargs="+", choices=("bare", "harness"), default=["bare", "harness"]
    )
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    parser.add_argument("--envs-sweep", type=int, nargs="+", default=[4, 16, 32, 64])
    parser.add_argument(
        "--batch-sweep", type=int, nargs="+", default=[8192, 16_384, 32_768, 65_536]
    )
    parser.add_argument("--runners-sweep", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument("--json", help="append every run's record to this JSONL file")
    args = parser.parse_args(argv)
    if args.iterations < 2:
        parser.error("--iterations must be at least 2 (the first is warm-up)")
    {
        "compare": compare,
        "bare-vs-harness": bare_vs_harness,
        "scale": scale,
        "runners": runners,
        "float-precision": float_precision,
        "compile-learner": compile_learner,
    }[args.command](args)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())

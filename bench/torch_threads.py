"""Oversubscription: concurrent runs with torch's default threads vs the hardware plan's.

Run: .venv/bin/python bench/torch_threads.py [--runs 2] [--rounds 5] [--steps 20]

Each "run" is a process doing what a cpu-local run's learner does in its driver: forward and
backward passes of a small transformer (the flagship's sizes: d_model 96, 3 layers, 4 heads,
64-step chunks) with an Adam step. `--runs` of them start together, as a sweep starts its
concurrent runs:

- before: each process keeps torch's default intra-op threads (every core of the machine);
- after: each takes the plan's, `resolve_profile("cpu-local", cpus=cores // runs)` (what
  `rl-harness sweep --cpus-per-run` gives each child through RL_HARNESS_TORCH_THREADS).

Rounds alternate before/after, so background load hits both alike; the table prints the
median wall seconds of a round (all runs finished) and the ratio before / after. On a busy
machine the numbers say little: quote them with the machine's load average.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time


def work(threads: int | None, steps: int, ready, start, out) -> None:
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(96, 4, 384, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch = torch.randn(32, 64, 96)  # a 2048-step minibatch in 64-step chunks
    ready.put(torch.get_num_threads())
    start.wait()
    began = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()
    out.put(time.perf_counter() - began)


def round_seconds(runs: int, threads: int | None, steps: int) -> tuple[float, int]:
    context = mp.get_context("spawn")
    ready, out, start = context.Queue(), context.Queue(), context.Event()
    procs = [
        context.Process(target=work, args=(threads, steps, ready, start, out)) for _ in range(runs)
    ]
    for proc in procs:
        proc.start()
    used = [ready.get() for _ in procs]
    began = time.perf_counter()
    start.set()
    for proc in procs:
        proc.join()
    elapsed = time.perf_counter() - began
    return elapsed, used[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="concurrent runs (default 2)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="learner steps per run and round")
    args = parser.parse_args()
    from rl_harness.harness.hardware import _cpu_budget, resolve_profile

    # "Before" is torch's own default, which these variables would change (also in children).
    for name in ("RL_HARNESS_TORCH_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.pop(name, None)
    cores = _cpu_budget()
    planned = resolve_profile("cpu-local", cpus=max(1, cores // args.runs)).torch_threads
    before, after = [], []
    threads_before = threads_after = 0
    for _ in range(args.rounds):
        seconds, threads_before = round_seconds(args.runs, None, args.steps)
        before.append(seconds)
        seconds, threads_after = round_seconds(args.runs, planned, args.steps)
        after.append(seconds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cores {cores}, concurrent runs {args.runs}, load average {load:.1f} (at the end)")
    print(f"{'threads per run':<28}{'median round s':>16}")
    print(f"{'before: torch default ' + str(threads_before):<28}{statistics.median(before):>16.2f}")
    print(f"{'after: plan ' + str(threads_after):<28}{statistics.median(after):>16.2f}")
    print(f"ratio before / after: {statistics.median(before) / statistics.median(after):.2f}")


if __name__ == "__main__":
    main()

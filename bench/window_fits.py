"""Window MLPs: one at a time against together, and the old library against this checkout.

The flagship's analysis fits its window baselines and incremental-R² models (the windows'
MLP, `rl_harness.analysis.WindowRegressor`) several per call; `fit_predict_many` trains the
models of one call in one optimizer loop. On the same synthetic data (a window of k = 1..K
steps of 6 inputs, 3 targets, the CPU budget's 192 x 512 train steps unless --rows):

- default: the K models fitted one at a time (`fit_predict_many` of one task, K times) and
  the K trained together, both in this process; the ratio and the largest difference
  between the two sets of predictions (zero: a model's numbers do not depend on the others
  in its loop).
- `--baseline-ref REF`: the fits of one analysis' greedy data, as the analysis calls them
  (the windows on tokens and actions, k = 1..K; on tokens only; the incremental test's 3K
  fits: each window alone (a), with the agent's (b) and with the control's (c) 3 read-out
  columns), once with the library at REF (checked out with `git worktree add --detach`
  under /tmp, removed afterwards) and once with this checkout, each in its own process at
  --threads threads. This checkout's side passes one `FitMemo` through the calls, as the
  analysis does (the K fits (a) are read, not trained again). Prints each side's CPU
  seconds (`time.process_time`: the machine may be loaded) and wall seconds per call and in
  all, the ratios, and whether every prediction is equal bit for bit.

    .venv/bin/python bench/window_fits.py                # K = 6, the default regressor
    .venv/bin/python bench/window_fits.py --rows 16384 --epochs 4   # a quick look
    .venv/bin/python bench/window_fits.py --baseline-ref 719409e --epochs 2

No timing assertion anywhere; say what else ran on the machine beside each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
INPUTS = 6  # per step: 3 token one-hot columns, 2 action coordinates, a presence flag
TOKENS = 3


def synthetic(rows: int, k_max: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(inputs (rows + rows // 3, INPUTS * k_max), targets (., 3)): newest step first."""
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(rows + rows // 3, INPUTS * k_max))
    targets = np.stack(
        [
            np.tanh(inputs[:, 0] * inputs[:, INPUTS % inputs.shape[1]]),
            np.sin(inputs[:, 1]),
            inputs[:, 2],
        ],
        -1,
    )
    return inputs, targets


def tasks(rows: int, k_max: int, seed: int = 0) -> list:
    """The K window fits k = 1..K on tokens and actions (init and batch seeds per k)."""
    from rl_harness.analysis.windows import FitTask

    inputs, targets = synthetic(rows, k_max, seed)
    return [
        FitTask(
            inputs[:rows, : INPUTS * k],
            targets[:rows],
            inputs[rows:, : INPUTS * k],
            init_seed=100 + k,
            batch_seed=200 + k,
        )
        for k in range(1, k_max + 1)
    ]


def analysis_calls(rows: int, k_max: int) -> dict[str, list]:
    """{call: [FitTask]} of one analysis' greedy data, in its order: the windows on tokens
    and actions, on tokens only, and the incremental test (per k: (a) the window's task
    itself, (b) and (c) with 3 read-out columns each, (a)'s seeds, their own extra seeds)."""
    import dataclasses

    inputs, targets = synthetic(rows, k_max)
    readouts = np.random.default_rng(1).normal(size=(inputs.shape[0], 6))
    windows = tasks(rows, k_max)
    token_columns = [c for c in range(INPUTS * k_max) if c % INPUTS < TOKENS]
    tokens_only = [
        dataclasses.replace(
            task,
            x_train=inputs[:rows, token_columns[: TOKENS * k]],
            x_test=inputs[rows:, token_columns[: TOKENS * k]],
            init_seed=300 + k,
            batch_seed=400 + k,
        )
        for k, task in enumerate(windows, start=1)
    ]
    incremental = []
    for k, task in enumerate(windows, start=1):
        # (a) as the incremental test builds it: the window with no extra columns (its
        # extra seed unused), equal in content to the baseline window's task.
        incremental.append(dataclasses.replace(task, extra_seed=500 + k))
        for name, columns in (("agent", slice(0, 3)), ("control", slice(3, 6))):
            extra = readouts[:, columns]
            incremental.append(
                dataclasses.replace(
                    task,
                    x_train=np.concatenate([task.x_train, extra[:rows]], axis=1),
                    x_test=np.concatenate([task.x_test, extra[rows:]], axis=1),
                    n_extra=3,
                    extra_seed=600 + 10 * k + (name == "control"),
                )
            )
    return {"windows": windows, "tokens_only": tokens_only, "incremental": incremental}


# One side of --baseline-ref: the library on PYTHONPATH first, this file's task builders.
CHILD = r"""
import json, sys, time
import numpy as np, torch
sys.path.insert(0, sys.argv[1])
import window_fits
from rl_harness.analysis import windows as library
rows, k_max, epochs, threads, out = (int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                     int(sys.argv[5]), sys.argv[6])
torch.set_num_threads(threads)
regressor = library.WindowRegressor(epochs=epochs)
calls = window_fits.analysis_calls(rows, k_max)
warm = window_fits.tasks(256, 1)
library.fit_predict_many(warm, library.WindowRegressor(epochs=1, batch_size=64))
memo = library.FitMemo() if hasattr(library, "FitMemo") else None
extra = {} if memo is None else {"memo": memo}
times, predictions = {}, {}
for name, work in calls.items():
    cpu, wall = time.process_time(), time.perf_counter()
    fits = library.fit_predict_many(work, regressor, **extra)
    times[name] = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                   "models": len(work)}
    for index, (train, test) in enumerate(fits):
        predictions[f"{name}_{index}_train"] = train
        predictions[f"{name}_{index}_test"] = test
np.savez(out, **predictions)
print("BENCH " + json.dumps({"times": times, "library": library.__file__,
                             "memo_reads": None if memo is None else memo.reads}), flush=True)
"""


def run_side(tree: Path, args: argparse.Namespace, out: Path) -> dict:
    env = os.environ | {
        "PYTHONPATH": str(tree / "src"),
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
    }
    argv = [str(REPO / "bench"), args.rows, args.k_max, args.epochs, args.threads, out]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *map(str, argv)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the fits failed:\n{done.stderr[-3000:]}")
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("BENCH "))
    return dict(json.loads(line[len("BENCH ") :]))


def side_by_side(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="window-fits-") as tmp:
        scratch = Path(tmp)
        old_tree = scratch / "old-tree"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(old_tree)]
            + [args.baseline_ref],
            check=True,
            capture_output=True,
        )
        try:
            sides = {}
            for name, tree in (("old", old_tree), ("new", REPO)):
                print(f"{name}: fitting ({tree})", flush=True)
                sides[name] = run_side(tree, args, scratch / f"{name}.npz")
            old = np.load(scratch / "old.npz")
            new = np.load(scratch / "new.npz")
            same = sorted(old.files) == sorted(new.files) and all(
                np.array_equal(old[key], new[key]) for key in old.files
            )
            gap = max(float(np.abs(old[key] - new[key]).max()) for key in old.files)
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_tree)],
                capture_output=True,
            )
            subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)
    print(
        f"one analysis' greedy-data fits, {args.rows} train steps each, {args.epochs} epochs, "
        f"{args.threads} thread(s); old = {args.baseline_ref}, new = this checkout"
        f" (FitMemo reads: {sides['new']['memo_reads']})"
    )
    print(
        f"  {'call':<12} {'models':>6} {'old cpu':>9} {'new cpu':>9} {'ratio':>7}"
        f" {'old wall':>9} {'new wall':>9}"
    )
    totals = {"old": [0.0, 0.0], "new": [0.0, 0.0]}
    for call, old_time in sides["old"]["times"].items():
        new_time = sides["new"]["times"][call]
        for side, t in (("old", old_time), ("new", new_time)):
            totals[side][0] += t["cpu_s"]
            totals[side][1] += t["wall_s"]
        print(
            f"  {call:<12} {old_time['models']:>6} {old_time['cpu_s']:9.1f} "
            f"{new_time['cpu_s']:9.1f} {old_time['cpu_s'] / new_time['cpu_s']:6.2f}x "
            f"{old_time['wall_s']:9.1f} {new_time['wall_s']:9.1f}"
        )
    (oc, ow), (nc, nw) = totals["old"], totals["new"]
    print(f"  {'all':<12} {'':>6} {oc:9.1f} {nc:9.1f} {oc / nc:6.2f}x {ow:9.1f} {nw:9.1f}")
    print(f"  every prediction equal bit for bit: {same} (largest difference {gap:.3g})")


def one_at_a_time(args: argparse.Namespace) -> None:
    import torch

    from rl_harness.analysis.windows import WindowRegressor, fit_predict_many

    torch.set_num_threads(args.threads)
    regressor = WindowRegressor(epochs=args.epochs)
    work = tasks(args.rows, args.k_max)
    fit_predict_many(work[:1], WindowRegressor(epochs=1, batch_size=64))  # imports, warm-up
    started = time.perf_counter()
    alone = [fit_predict_many([task], regressor)[0] for task in work]
    seconds_alone = time.perf_counter() - started
    started = time.perf_counter()
    together = fit_predict_many(work, regressor)
    batched = time.perf_counter() - started
    gap = max(float(np.abs(a[1] - b[1]).max()) for a, b in zip(alone, together, strict=True))
    print(
        f"{len(work)} window MLPs, {args.rows} train steps each, {args.epochs} epochs, "
        f"{args.threads} thread(s)"
    )
    print(f"  one at a time: {seconds_alone:8.1f} s")
    print(f"  together:      {batched:8.1f} s   ({seconds_alone / batched:.2f}x)")
    print(f"  largest difference between the two sets of test predictions: {gap:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=192 * 512, help="train steps per model")
    parser.add_argument("--k-max", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=20, help="WindowRegressor's (20)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--baseline-ref",
        help="compare one analysis' greedy-data fits with the library at this git ref",
    )
    args = parser.parse_args()
    if args.baseline_ref:
        side_by_side(args)
    else:
        one_at_a_time(args)


if __name__ == "__main__":
    main()

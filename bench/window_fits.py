"""Window MLPs trained together against one at a time, side by side in one process.

The flagship's analysis fits its window baselines and incremental-R² models (the windows'
MLP, `rl_harness.analysis.WindowRegressor`) several per call; `fit_predict_many` trains the
models of one call in one optimizer loop. This times, on the same synthetic data (a window
of k = 1..K steps of 5 inputs, 3 targets, the CPU budget's 192 x 512 train steps unless
--rows), the K models fitted one at a time (`fit_predict_many` of one task, K times) and the
K trained together, and prints both, the ratio, and the largest difference between the two
sets of predictions (zero: a model's numbers do not depend on the others in its loop).

    .venv/bin/python bench/window_fits.py                # K = 6, the default regressor
    .venv/bin/python bench/window_fits.py --rows 16384 --epochs 4   # a quick look

No timing assertion anywhere; say what else ran on the machine beside each figure.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from rl_harness.analysis.windows import FitTask, WindowRegressor, fit_predict_many


def tasks(rows: int, k_max: int, seed: int = 0) -> list[FitTask]:
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(rows + rows // 3, 5 * k_max))
    targets = np.stack(
        [
            np.tanh(inputs[:, 0] * inputs[:, 5 % inputs.shape[1]]),
            np.sin(inputs[:, 1]),
            inputs[:, 2],
        ],
        -1,
    )
    return [
        FitTask(
            inputs[:rows, : 5 * k],
            targets[:rows],
            inputs[rows:, : 5 * k],
            init_seed=100 + k,
            batch_seed=200 + k,
        )
        for k in range(1, k_max + 1)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=192 * 512, help="train steps per model")
    parser.add_argument("--k-max", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=WindowRegressor().epochs)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    regressor = WindowRegressor(epochs=args.epochs)
    work = tasks(args.rows, args.k_max)
    fit_predict_many(work[:1], WindowRegressor(epochs=1, batch_size=64))  # imports, warm-up
    started = time.perf_counter()
    alone = [fit_predict_many([task], regressor)[0] for task in work]
    one_at_a_time = time.perf_counter() - started
    started = time.perf_counter()
    together = fit_predict_many(work, regressor)
    batched = time.perf_counter() - started
    gap = max(float(np.abs(a[1] - b[1]).max()) for a, b in zip(alone, together, strict=True))
    print(
        f"{len(work)} window MLPs, {args.rows} train steps each, {args.epochs} epochs, "
        f"{args.threads} thread(s)"
    )
    print(f"  one at a time: {one_at_a_time:8.1f} s")
    print(f"  together:      {batched:8.1f} s   ({one_at_a_time / batched:.2f}x)")
    print(f"  largest difference between the two sets of test predictions: {gap:.3g}")


if __name__ == "__main__":
    main()

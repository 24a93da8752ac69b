"""The incremental test's cross-fitted read-out: refitted per fold (one SVD of the rows per
fit, the library before issue 53's row blocks) against `window_residual_readout` (each fold
factored once, `probes.affine.row_blocks` / `block_ridge`), side by side in one process.

At the flagship's CPU-budget sizes by default: 256 episodes x 512 steps, 192 train episodes,
a 96-wide representation on a layer norm's hyperplane, a 36-wide window (k = 6), 3 targets.
The two paths alternate `--rounds` times; prints each one's wall and CPU seconds (median),
the ratio refitted / row blocks, and the largest difference of their read-outs.

    OMP_NUM_THREADS=1 .venv/bin/python bench/readout_crossfit.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rl_harness.analysis.incremental import window_residual_readout
from rl_harness.analysis.probes import fit_affine, ridge_solver


def refitted(rep: np.ndarray, window: np.ndarray, y: np.ndarray, train: np.ndarray) -> np.ndarray:
    """The read-out with every fit refitted from its rows (`ridge_solver` per fit, 5 folds)."""

    def flat(values: np.ndarray) -> np.ndarray:
        return values.reshape(-1, values.shape[-1])

    affine = fit_affine(flat(window[train]), flat(rep[train]))
    residual = rep - affine.predict(flat(window)).reshape(rep.shape)

    def readout(fit: np.ndarray, apply: np.ndarray) -> np.ndarray:
        solver = ridge_solver(flat(residual[fit]))
        return (residual[apply] - solver.x_mean) @ solver.weights(
            flat(y[fit]) - flat(y[fit]).mean(axis=0)
        )

    out = np.zeros(y.shape)
    test = np.setdiff1d(np.arange(len(y)), train)
    out[test] = readout(train, test)
    folds = np.arange(len(train)) % 5
    for fold in range(5):
        out[train[folds == fold]] = readout(train[folds != fold], train[folds == fold])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--width", type=int, default=96)
    parser.add_argument("--window", type=int, default=36)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    shape = (args.episodes, args.steps)
    rep = rng.normal(size=(*shape, args.width)) * rng.uniform(0.2, 3.0, size=args.width)
    rep -= rep.mean(axis=-1, keepdims=True)  # a layer norm's hyperplane: rank width - 1
    window = rng.integers(0, 2, size=(*shape, args.window)).astype(np.float64)
    y = rng.dirichlet(np.ones(3), size=shape)
    train = np.sort(rng.permutation(args.episodes)[: args.episodes * 3 // 4])
    paths = {
        "refitted per fold": lambda: refitted(rep, window, y, train),
        "row blocks": lambda: window_residual_readout(rep, window, y, train=train)[0],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    outputs = {}
    for _ in range(args.rounds):
        for name, path in paths.items():
            wall, cpu = time.perf_counter(), time.process_time()
            outputs[name] = path()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    medians = {}
    for name, rows in times.items():
        medians[name] = tuple(statistics.median(row[i] for row in rows) for i in (0, 1))
        print(f"{name:18s} wall {medians[name][0]:7.2f} s  cpu {medians[name][1]:7.2f} s")
    old, new = medians["refitted per fold"], medians["row blocks"]
    print(f"ratio refitted / row blocks: wall {old[0] / new[0]:.2f}x, cpu {old[1] / new[1]:.2f}x")
    difference = np.abs(outputs["refitted per fold"] - outputs["row blocks"]).max()
    print(
        f"largest read-out difference {difference:.1e} (read-outs up to "
        f"{np.abs(outputs['row blocks']).max():.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Permutation null of a probe: one shared SVD (permutation_null) vs one least-squares refit per
permutation (fit_affine in a loop), same data and same shuffles, measured side by side.

Run: .venv/bin/python bench/permutation_null.py [--permutations 50] [--rounds 3]  (about 2 minutes)

Data: 400 episodes x 64 steps, 64 features, 3 targets (a GRU-sized probe). Prints the median
seconds of each over `--rounds` interleaved rounds and their ratio, and checks both give the
same null values.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from rl_harness.analysis.probes import fit_affine, permutation_null


def naive(x_tr, y_tr, x_te, y_te, n_permutations, rng):
    k, d = y_tr.shape[2], x_tr.shape[2]
    sst = ((y_te.reshape(-1, k) - y_te.reshape(-1, k).mean(0)) ** 2).sum()
    out = []
    for _ in range(n_permutations):
        order_tr, order_te = rng.permutation(len(x_tr)), rng.permutation(len(x_te))
        probe = fit_affine(x_tr.reshape(-1, d), y_tr[order_tr].reshape(-1, k))
        pred = probe.predict(x_te.reshape(-1, d))
        out.append(1 - ((y_te[order_te].reshape(-1, k) - pred) ** 2).sum() / sst)
    return np.asarray(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permutations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 64, 64))
    y = x[..., :3] @ rng.normal(size=(3, 3)) + rng.normal(size=(400, 64, 3))
    x_tr, x_te, y_tr, y_te = x[:300], x[300:], y[:300], y[300:]
    times = {"shared SVD": [], "refit each": []}
    for _ in range(args.rounds):
        start = time.perf_counter()
        fast = permutation_null(
            x_tr,
            y_tr,
            x_te,
            y_te,
            observed=0.5,
            ridge=0.0,
            n_permutations=args.permutations,
            rng=np.random.default_rng(1),
        )
        times["shared SVD"].append(time.perf_counter() - start)
        start = time.perf_counter()
        slow = naive(x_tr, y_tr, x_te, y_te, args.permutations, np.random.default_rng(1))
        times["refit each"].append(time.perf_counter() - start)
    np.testing.assert_allclose(fast.null_r2_pooled, slow, atol=1e-9)
    medians = {name: float(np.median(values)) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:>11}: {value:.3f} s for {args.permutations} permutations")
    print(f"ratio refit/shared: {medians['refit each'] / medians['shared SVD']:.1f}x")


if __name__ == "__main__":
    main()

"""Within-branch R²: what a probe explains among steps that saw the same recent tokens.

A branch is the set of steps whose last k visible tokens are equal (k chosen by the caller;
steps nearer the episode start than k have a shorter, padded history and branches of their
own). A memoryless reading of those k tokens can predict at best each branch's mean target;
within-branch R² measures how much of the target's variance *around* those means the probe
explains:

    R²_within = 1 - sum_b sum_{t in b} |y_t - ŷ_t|² / sum_b sum_{t in b} |y_t - mean_b(y)|²

pooled over branches (branches with a single step carry no within variance and are left
out), per target and pooled over targets. The probe's own predictions are used as they are,
so a probe that misses a branch mean pays for it. Sums are kept per episode and branch, so an
episode bootstrap is one matrix product, as for the global scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_harness.analysis.probes.windows import window_features


def branch_ids(tokens: np.ndarray, k: int) -> np.ndarray:
    """(E, T) branch labels 0..B-1 from (E, T) or (E, T, m) per-step codes and branch depth
    k >= 0.

    Step t belongs to the branch of (tokens[t-k+1], ..., tokens[t]): its key is the last k
    steps as `window_features` builds them (the baseline windows' input, so a branch and a
    baseline window of the same k see the same steps), with positions before the episode
    start marked absent, so early steps never share a branch with later ones. Labels number
    the keys in sorted order, oldest step first. k = 0 puts every step in one branch
    (within-branch R² is then the global R²).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"the branch depth k must be an int >= 0, got {k!r}")
    array = np.asarray(tokens)
    if array.ndim not in (2, 3) or min(array.shape) == 0:
        raise ValueError(f"tokens must be a non-empty (E, T) or (E, T, m) array, got {array.shape}")
    episodes, steps = array.shape[:2]
    if k == 0:
        return np.zeros((episodes, steps), dtype=np.int64)
    values = array.reshape(episodes, steps, -1).astype(np.float64)
    keys = window_features(values, k).reshape(episodes, steps, k, -1)[:, :, ::-1]
    return _row_labels(keys.reshape(episodes * steps, -1)).reshape(episodes, steps)


def _row_labels(rows: np.ndarray) -> np.ndarray:
    """(n,) the rank of each row among the distinct rows in lexicographic order: what
    `np.unique(rows, axis=0, return_inverse=True)` gives, by one lexsort of the columns
    (np.unique sorts the rows as one structured type, many times slower)."""
    order = np.lexsort(rows.T[::-1])  # the first column is the primary key
    ranked = rows[order]
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = np.any(ranked[1:] != ranked[:-1], axis=1)
    labels = np.empty(len(rows), dtype=np.int64)
    labels[order] = np.cumsum(starts) - 1
    return labels


@dataclass(frozen=True)
class BranchSums:
    """Per-episode, per-branch sufficient statistics; leading axis: episodes (or resamples)."""

    count: np.ndarray  # (..., B)
    squared_error: np.ndarray  # (..., B, k)
    centered_sum: np.ndarray  # (..., B, k) targets centred on the branch's overall mean
    centered_square: np.ndarray  # (..., B, k)

    def weighted(self, weights: np.ndarray) -> BranchSums:
        """Sums over episodes under (R, n_episodes) weights (bootstrap counts, or ones)."""
        return BranchSums(
            count=weights @ self.count,
            squared_error=np.einsum("re,ebk->rbk", weights, self.squared_error),
            centered_sum=np.einsum("re,ebk->rbk", weights, self.centered_sum),
            centered_square=np.einsum("re,ebk->rbk", weights, self.centered_square),
        )

    def total(self) -> BranchSums:
        return self.weighted(np.ones((1, self.count.shape[0])))


def branch_sums(targets: np.ndarray, predictions: np.ndarray, branches: np.ndarray) -> BranchSums:
    """Per-episode sums from (E, T, k) targets and predictions and (E, T) branch labels."""
    y = np.asarray(targets, dtype=np.float64)
    pred = np.asarray(predictions, dtype=np.float64)
    labels = np.asarray(branches)
    if y.ndim != 3 or y.shape != pred.shape or labels.shape != y.shape[:2]:
        raise ValueError(
            "targets and predictions must be (E, T, k) and branches (E, T), got "
            f"{y.shape}, {pred.shape} and {labels.shape}"
        )
    episodes, _, k = y.shape
    _, label = np.unique(labels, return_inverse=True)
    label = label.reshape(labels.shape)
    n_branches = int(label.max()) + 1
    flat = (np.arange(episodes)[:, None] * n_branches + label).ravel()
    size = episodes * n_branches
    count = np.bincount(flat, minlength=size).astype(np.float64)
    totals = np.stack([np.bincount(label.ravel(), y[..., j].ravel()) for j in range(k)], -1)
    means = totals / np.bincount(label.ravel())[:, None]
    centered = y - means[label]

    def per_episode(values: np.ndarray) -> np.ndarray:
        columns = [np.bincount(flat, values[..., j].ravel(), minlength=size) for j in range(k)]
        return np.stack(columns, -1).reshape(episodes, n_branches, k)

    return BranchSums(
        count=count.reshape(episodes, n_branches),
        squared_error=per_episode((y - pred) ** 2),
        centered_sum=per_episode(centered),
        centered_square=per_episode(centered**2),
    )


@dataclass(frozen=True)
class WithinScores:
    """Within-branch scores with the leading shape of the sums (R,) for R resamples."""

    r2: np.ndarray  # (R, k)
    r2_pooled: np.ndarray  # (R,)
    variance: np.ndarray  # (R, k) mean within-branch variance per used step
    steps_used: np.ndarray  # (R,) steps in branches with at least 2 steps
    branches_used: np.ndarray  # (R,)
    sst: np.ndarray  # (R, k) squared deviations from the branch means, used branches


def within_scores(sums: BranchSums, include: np.ndarray | None = None) -> WithinScores:
    """Pooled-over-branches within-branch R² of (R, B, ...) summed statistics: the one
    place it is computed (probe reports, paired bootstraps, the conditional null's refits
    and the yardstick's variance share all call it); `include` (k,) bools pick the targets
    the pooled R² uses."""
    n = sums.count  # (R, B)
    used = n >= 2
    safe = np.where(n > 0, n, 1.0)[..., None]
    sst_b = np.maximum(sums.centered_square - sums.centered_sum**2 / safe, 0.0)
    sst = (sst_b * used[..., None]).sum(axis=1)  # (R, k)
    sse = (sums.squared_error * used[..., None]).sum(axis=1)
    k = sst.shape[-1]
    keep = np.ones(k, dtype=bool) if include is None else np.asarray(include, dtype=bool)
    steps = (n * used).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(sst > 0, 1.0 - sse / sst, np.nan)
        sst_all = (sst * keep).sum(axis=-1)
        r2_pooled = np.where(sst_all > 0, 1.0 - (sse * keep).sum(axis=-1) / sst_all, np.nan)
        variance = np.where(steps[:, None] > 0, sst / steps[:, None], 0.0)
    return WithinScores(r2, r2_pooled, variance, steps, used.sum(axis=1), sst)

"""The last k steps of a recorded sequence, and the binning that makes branches of actions.

`window_features(sequence, k)` is the input of a baseline window k and the key of a branch
of depth k (`branches.branch_ids`): at each step the last k entries of a per-step feature
sequence (e.g. the visible token one-hot and the previous executed action), newest first,
each with a 'present' flag (0 for positions before the episode's first step, whose entries
are zeros). `history` prepends steps read before the recorded ones (a rollout's warm-up),
so recorded steps see a full window.

`quantile_bins(values, n_bins, fit=...)` codes each coordinate of continuous values (actions)
by its rank among the fit sample's values (equal-frequency bins; ties share a bin), so
branches can also condition on binned actions
(`branch_ids(np.concatenate([tokens, bins], -1), k)`).
"""

from __future__ import annotations

import numpy as np


def _sequence(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 3 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (n_episodes, T, m) array, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return array


def window_features(sequence: np.ndarray, k: int, history: np.ndarray | None = None) -> np.ndarray:
    """(E, T, k * (m + 1)) windows of an (E, T, m) sequence: for each lag 0..k-1 (0 = the
    step itself) the entry at t - lag and a flag that it exists.

    `history` (E, W, m) holds the W steps before the first recorded one (same episodes);
    positions before the history's start count as missing (zeros, flag 0).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"the window k must be an int >= 1, got {k!r}")
    values = _sequence("sequence", sequence)
    episodes, steps, width = values.shape
    if history is not None:
        past = np.asarray(history, dtype=np.float64)
        if past.ndim != 3 or past.shape[0] != episodes or past.shape[2] != width:
            raise ValueError(
                f"history must be (n_episodes, W, m) = ({episodes}, W, {width}), got {past.shape}"
            )
        values = np.concatenate([past, values], axis=1)
    offset = values.shape[1] - steps
    out = np.zeros((episodes, steps, k, width + 1))
    for lag in range(k):
        # Recorded step t sits at offset + t in `values`; its lag-th entry at offset + t - lag.
        first = max(0, lag - offset)  # the first recorded step whose lag-th entry exists
        if first >= steps:
            continue
        source = values[:, offset + first - lag : offset + steps - lag]
        out[:, first:, lag, :width] = source
        out[:, first:, lag, width] = 1.0
    return out.reshape(episodes, steps, k * (width + 1))


def quantile_bins(values: np.ndarray, n_bins: int, *, fit: np.ndarray | None = None) -> np.ndarray:
    """(E, T, a) int codes 0..n_bins-1 of (E, T, a) values, per coordinate by rank in the
    `fit` sample ((E', T', a); default `values` itself: pass the fit episodes only, so the
    bins are chosen without the held-out ones).

    A value's code is floor(n_bins * F), F its mid-rank in the fit sample ((#{x < v} +
    #{x <= v}) / 2n), capped at n_bins - 1. Distinct values fall in equal-frequency bins (the
    quantile cut); tied values share one bin, and a point mass (actions held at the clip
    bound) takes the bin of its middle rank instead of swallowing every other value, which
    cutting at quantile edges does when several edges coincide with it."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be an int >= 1, got {n_bins!r}")
    array = _sequence("values", values)
    reference = array if fit is None else _sequence("fit", fit)
    if reference.shape[2] != array.shape[2]:
        raise ValueError(f"fit has {reference.shape[2]} coordinates, values {array.shape[2]}")
    pooled = np.sort(reference.reshape(-1, reference.shape[2]), axis=0)
    n = pooled.shape[0]
    codes = np.empty(array.shape, dtype=np.int64)
    for j in range(array.shape[2]):
        below = np.searchsorted(pooled[:, j], array[..., j], side="left")
        at_most = np.searchsorted(pooled[:, j], array[..., j], side="right")
        rank = (below + at_most) / (2.0 * n)
        codes[..., j] = np.minimum(np.floor(n_bins * rank).astype(np.int64), n_bins - 1)
    return codes

"""A regular grid on the 2-simplex and barycentric interpolation on its triangles."""

from __future__ import annotations

import numpy as np


class SimplexGrid:
    """Points (i, j, n - i - j) / n for i + j <= n: (n + 1)(n + 2) / 2 beliefs over 3 states.

    `locate(beliefs)` gives, for each belief, the 3 grid points of the small triangle holding
    it and its barycentric weights there, so a function known on the grid is interpolated
    linearly: f(b) = sum_v weight_v f(point_v).
    """

    def __init__(self, per_edge: int) -> None:
        if per_edge < 1:
            raise ValueError(f"a simplex grid needs at least 1 interval per edge, got {per_edge}")
        n = per_edge
        self.per_edge = n
        i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        keep = i + j <= n
        self.index = np.full((n + 1, n + 1), -1, dtype=np.int64)
        self.index[i[keep], j[keep]] = np.arange(keep.sum())
        coords = np.stack([i[keep], j[keep], n - i[keep] - j[keep]], axis=1)
        self.points = coords / n  # (n_points, 3)

    def __len__(self) -> int:
        return len(self.points)

    def locate(self, beliefs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vertex indices (..., 3) and barycentric weights (..., 3) of beliefs (..., 3)."""
        n = self.per_edge
        x = np.clip(beliefs[..., 0], 0.0, 1.0) * n
        y = np.clip(beliefs[..., 1], 0.0, 1.0) * n
        total = x + y
        over = total > n  # rounding can push x + y a hair past n
        x = np.where(over, x * n / np.where(over, total, 1.0), x)
        y = np.where(over, y * n / np.where(over, total, 1.0), y)
        i = np.minimum(np.floor(x), n - 1).astype(np.int64)
        j = np.minimum(np.floor(y), n - 1).astype(np.int64)
        fx, fy = x - i, y - j
        upper = fx + fy > 1.0
        # Lower triangle (i, j), (i + 1, j), (i, j + 1); the upper one swaps its first vertex
        # for (i + 1, j + 1), which lies inside the simplex whenever it is used.
        vi = np.stack([i + upper, i + 1, i], axis=-1)
        vj = np.stack([j + upper, j, j + 1], axis=-1)
        weights = np.stack(
            [
                np.where(upper, fx + fy - 1.0, 1.0 - fx - fy),
                np.where(upper, 1.0 - fy, fx),
                np.where(upper, 1.0 - fx, fy),
            ],
            axis=-1,
        )
        # A vertex off the simplex (index -1) only ever has weight 0: point it at vertex 0.
        index = np.maximum(self.index[vi, vj], 0)
        return index, np.clip(weights, 0.0, None)

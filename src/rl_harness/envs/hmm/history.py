"""Newest-first windows of recent events (tokens, actions) for n env copies."""

from __future__ import annotations

import numpy as np


class NewestFirstHistory:
    """The last `length` values per copy, newest first, `fill` where nothing happened yet.

    A value is a scalar (tokens, discrete actions: int64, fill -1) or an array of `shape`
    (continuous actions). Each value is written twice, at columns p and p + length of a
    doubled buffer, with p moving left; `window()` is then the plain slice [p, p + length),
    so a push writes two columns instead of shifting the whole window.
    """

    def __init__(
        self,
        n: int,
        length: int,
        shape: tuple[int, ...] = (),
        dtype: type = np.int64,
        fill: float = -1,
    ) -> None:
        self.length = length
        self._fill = fill
        self._buffer: np.ndarray = np.full((n, 2 * length, *shape), fill, dtype=dtype)
        self._start = 0

    def push(self, values: np.ndarray) -> None:
        if not self.length:
            return
        self._start = (self._start - 1) % self.length
        self._buffer[:, self._start] = values
        self._buffer[:, self._start + self.length] = values

    def window(self) -> np.ndarray:
        """(n, length, *shape) view: column 0 is the newest value."""
        return self._buffer[:, self._start : self._start + self.length]

    def clear(self, mask: np.ndarray) -> None:
        self._buffer[mask] = self._fill

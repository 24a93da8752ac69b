"""Per-copy random streams drawn in lockstep, so n copies take one uniform each per call.

Copy i owns its own generator (so its draws equal a single env's with the same seed), but the
uniforms are pre-drawn into a shared (block, n) buffer and every call consumes one row: the
hot path is a row view, and the Python loop over generators runs once per `block` calls.
"""

from __future__ import annotations

import numpy as np


class LockstepUniforms:
    """Uniforms in [0, 1) for n copies; `next()` returns one per copy, (n,) float64."""

    def __init__(self, generators: list[np.random.Generator], block: int = 1024) -> None:
        if not generators:
            raise ValueError("need at least one generator")
        self._generators = list(generators)
        self._block = block
        self._buffer = np.empty((block, len(generators)))
        self._fill()

    def _fill(self) -> None:
        for i, generator in enumerate(self._generators):
            self._buffer[:, i] = generator.random(self._block)
        self._cursor = 0

    def next(self) -> np.ndarray:
        if self._cursor == self._block:
            self._fill()
        row: np.ndarray = self._buffer[self._cursor]
        self._cursor += 1
        return row

    def replace(self, index: int, generator: np.random.Generator) -> None:
        """Give copy `index` a new generator; its next draws are that generator's first ones."""
        self._generators[index] = generator
        # Fill only the rows not yet consumed, so the shared cursor stays valid for all copies.
        self._buffer[self._cursor :, index] = generator.random(self._block - self._cursor)

"""Named random streams derived from one root seed.

Every layer may import this module (it depends on NumPy only). A stream is a
`numpy.random.SeedSequence` whose spawn key is derived from stable names, never
from spawn order, so adding a stream never moves another.
"""

from __future__ import annotations

import hashlib

import numpy as np


def _name_key(name: str) -> int:
    # 32 bits of sha256: stable across processes and Python versions (unlike hash()).
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "little")


def stream_sequence(root_seed: int, *names: str) -> np.random.SeedSequence:
    """The SeedSequence of the stream `names` (e.g. "env", "emission") under `root_seed`."""
    if isinstance(root_seed, bool) or not isinstance(root_seed, int | np.integer):
        raise TypeError(f"root seed must be an int, got {type(root_seed).__name__}")
    if root_seed < 0:
        raise ValueError(f"root seed must be non-negative, got {root_seed}")
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError("stream names must be non-empty strings")
    return np.random.SeedSequence(int(root_seed), spawn_key=tuple(_name_key(n) for n in names))


def stream_rng(root_seed: int, *names: str) -> np.random.Generator:
    """A fresh PCG64 generator for the named stream."""
    return np.random.Generator(np.random.PCG64(stream_sequence(root_seed, *names)))


def stream_seed(root_seed: int, *names: str) -> int:
    """A 31-bit integer seed for the named stream (for APIs that take an int seed)."""
    return int(stream_sequence(root_seed, *names).generate_state(1, np.uint32)[0] >> 1)

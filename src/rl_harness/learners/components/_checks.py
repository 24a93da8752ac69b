"""Argument checks shared by the components (clear errors for bad sizes)."""

from __future__ import annotations

from collections.abc import Sequence


def positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def positive_sizes(name: str, value: object, *, allow_empty: bool) -> tuple[int, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a sequence of positive ints, got {value!r}")
    sizes = tuple(value)
    if not sizes and not allow_empty:
        raise ValueError(f"{name} must not be empty")
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"{name} must contain positive ints only, got {value!r}")
    return sizes

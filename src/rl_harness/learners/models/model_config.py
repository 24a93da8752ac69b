"""Typed reads from an RLModule's `model_config`, with errors that name the key."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

_REQUIRED = object()

# Keys an RLlib algorithm config adds to every model_config on its own (PPO, APPO:
# "vf_share_layers"); accepted and unused (our trunks always feed both heads).
RLLIB_KEYS = frozenset({"vf_share_layers"})


def check_known_keys(config: Mapping[str, Any], accepted: Collection[str], owner: str) -> None:
    """One clear error for the first key outside `accepted` (and RLLIB_KEYS)."""
    unknown = sorted(str(k) for k in config if k not in accepted and k not in RLLIB_KEYS)
    if unknown:
        raise ValueError(
            f"{owner}: unknown model_config key {unknown[0]!r}; accepted keys: "
            f"{', '.join(sorted(accepted))}"
        )


def _get(config: Mapping[str, Any], key: str, default: object) -> object:
    if key in config and config[key] is not None:
        return config[key]
    if default is _REQUIRED:
        raise ValueError(f"model_config is missing the required key {key!r}")
    return default


def config_int(config: Mapping[str, Any], key: str, default: object = _REQUIRED) -> int:
    """A positive int under `key` (or `default`; no default means required)."""
    value = _get(config, key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"model_config[{key!r}] must be a positive int, got {value!r}")
    return value


def config_float(
    config: Mapping[str, Any], key: str, default: float, *, low: float, high: float
) -> float:
    """A float in [low, high) under `key`."""
    value = _get(config, key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value < high:
        raise ValueError(
            f"model_config[{key!r}] must be a number in [{low}, {high}), got {value!r}"
        )
    return float(value)


def config_positive_float(config: Mapping[str, Any], key: str, default: float) -> float:
    """A finite float > 0 under `key` (a std, a scale)."""
    value = _get(config, key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"model_config[{key!r}] must be a positive number, got {value!r}")
    return float(value)


def config_sizes(
    config: Mapping[str, Any], key: str, default: Sequence[int], *, allow_empty: bool
) -> tuple[int, ...]:
    """A list of positive ints (layer sizes) under `key`."""
    value = _get(config, key, default)
    is_list = not isinstance(value, str | bytes) and isinstance(value, Sequence)
    items: tuple[object, ...] = tuple(value) if isinstance(value, Sequence) and is_list else ()
    sizes = tuple(s for s in items if not isinstance(s, bool) and isinstance(s, int) and s > 0)
    ok = is_list and len(sizes) == len(items)
    if not ok or (not sizes and not allow_empty):
        what = "a list of positive ints" + ("" if allow_empty else " (non-empty)")
        raise ValueError(f"model_config[{key!r}] must be {what}, got {value!r}")
    return sizes


def config_choice(
    config: Mapping[str, Any], key: str, default: str, choices: Collection[str]
) -> str:
    """One of `choices` under `key`."""
    value = _get(config, key, default)
    if value not in choices:
        raise ValueError(f"model_config[{key!r}] must be one of {sorted(choices)}, got {value!r}")
    return str(value)


def config_bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    """A bool under `key`."""
    value = _get(config, key, default)
    if not isinstance(value, bool):
        raise ValueError(f"model_config[{key!r}] must be true or false, got {value!r}")
    return value

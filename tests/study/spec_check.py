"""What a study leaf changes against its study's spec (spec.py): the config keys that differ."""

from __future__ import annotations

import re
from typing import Any


def _comparable(value: Any) -> str:
    """A value's repr without object addresses (functools.partial compares by identity)."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def changed_keys(base: Any, own: Any) -> set[str]:
    """The `to_dict()` keys whose values differ between the configs `base` and `own`."""
    a, b = base.to_dict(), own.to_dict()
    return {
        key for key in a.keys() | b.keys() if _comparable(a.get(key)) != _comparable(b.get(key))
    }

"""On-disk cache of solver results, keyed by the problem and the solver's settings.

Location: $RL_HARNESS_SOLVER_CACHE if set, else $XDG_CACHE_HOME/rl_harness/mess3_solvers
(XDG_CACHE_HOME defaults to ~/.cache). One .npz per result, named by the sha256 of its
canonical JSON key; written to a temporary file and renamed, so readers never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

CACHE_ENV = "RL_HARNESS_SOLVER_CACHE"
# Bump when a solver's algorithm changes what it returns, so old entries are not reused.
CACHE_VERSION = 1


def default_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rl_harness" / "mess3_solvers"


def resolve_cache(cache: bool | str | Path) -> Path | None:
    """True: the default directory; False: no cache; a path: that directory."""
    if cache is True:
        return default_cache_dir()
    if cache is False:
        return None
    return Path(cache)


def cached(
    directory: Path | None,
    key: dict[str, Any],
    compute: Callable[[], tuple[float, dict[str, np.ndarray]]],
) -> tuple[float, dict[str, np.ndarray]]:
    """(value, arrays) for `key`, from `directory` when present, else computed and stored."""
    if directory is None:
        return compute()
    text = json.dumps({"version": CACHE_VERSION, **key}, sort_keys=True)
    path = directory / f"{key['solver']}-{hashlib.sha256(text.encode()).hexdigest()[:20]}.npz"
    if path.exists():
        with np.load(path) as stored:
            if str(stored["key"]) == text:
                arrays = {name: stored[name] for name in stored.files}
                value = float(arrays.pop("value"))
                arrays.pop("key")
                return value, arrays
    value, arrays = compute()
    directory.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".npz.tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            np.savez(stream, key=np.array(text), value=np.array(value), **arrays)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return value, arrays

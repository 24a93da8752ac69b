"""On-disk cache of solver results, keyed by the problem, the solver's settings and
SOLVER_VERSION.

Location: $RL_HARNESS_SOLVER_CACHE if set, else $XDG_CACHE_HOME/rl_harness/mess3_solvers
(XDG_CACHE_HOME defaults to ~/.cache). One .npz per result, named by the sha256 of its
canonical JSON key; written to a temporary file and renamed, so readers never see half a file.
Only converged results are stored: an unconverged one (arrays["converged"] false) is returned
with one SolverConvergenceWarning (`warnings`) and computed afresh next time.

A solve that runs (not served from the cache) says what it is doing on the stdlib logger
"rl_harness.envs.mess3.solvers" (`log`): one INFO line when it starts (which solver, how big
its problem is) and one when it ends (value, converged, seconds). A cache hit logs nothing.
The harness CLI shows these lines (its handler is on the parent "rl_harness" logger).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rl_harness.envs.mess3.solvers.solution import SolverConvergenceWarning

# Stdlib logging only: envs import no other rl_harness layer (the harness configures the
# parent "rl_harness" logger's console handler).
log = logging.getLogger("rl_harness.envs.mess3.solvers")
HEARTBEAT_S = 30.0  # seconds between "still solving" lines of a long first solve

CACHE_ENV = "RL_HARNESS_SOLVER_CACHE"
# Part of every key: bump it when a solver's algorithm changes what it returns, so a fixed
# solver never serves a value cached by an older one. 2: global window scan, convergence flags.
SOLVER_VERSION = 2


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
    *,
    name: str,
    plan: str,
) -> tuple[float, dict[str, np.ndarray]]:
    """(value, arrays) for `key`, from `directory` when present, else computed (and stored
    when converged). `compute` returns arrays holding "converged", "iterations", "residual".
    A computation logs `name` and `plan` (what it will do, how big) when it starts and
    `name` with its value, convergence and seconds when it ends."""
    text = json.dumps({"version": SOLVER_VERSION, **key}, sort_keys=True)
    if directory is None:
        return _checked(_logged(compute, name, plan), text)
    path = directory / f"{key['solver']}-{hashlib.sha256(text.encode()).hexdigest()[:20]}.npz"
    if path.exists():
        with np.load(path) as stored:
            if str(stored["key"]) == text:
                arrays = {name: stored[name] for name in stored.files}
                value = float(arrays.pop("value"))
                arrays.pop("key")
                return value, arrays
    value, arrays = _checked(_logged(compute, name, plan), text)
    if not bool(arrays["converged"]):
        return value, arrays
    directory.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".npz.tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            # One dict of Any: savez's stubs fear an array named allow_pickle in **arrays.
            entries: dict[str, Any] = {"key": np.array(text), "value": np.array(value), **arrays}
            np.savez(stream, **entries)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return value, arrays


def _logged(
    compute: Callable[[], tuple[float, dict[str, np.ndarray]]], name: str, plan: str
) -> tuple[float, dict[str, np.ndarray]]:
    """compute(), between an INFO line saying what starts and one with how it ended, and
    one every HEARTBEAT_S while it runs (a first solve can take minutes)."""
    log.info("solving %s: %s", name, plan)
    started = time.perf_counter()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(HEARTBEAT_S):
            log.info("still solving %s: %.0f s so far", name, time.perf_counter() - started)

    beating = threading.Thread(target=heartbeat, name="solver-heartbeat", daemon=True)
    beating.start()
    try:
        value, arrays = compute()
    finally:
        done.set()
        beating.join()
    log.info(
        "solved %s: value %.6f, converged %s, %.1f s",
        name,
        value,
        bool(arrays["converged"]),
        time.perf_counter() - started,
    )
    return value, arrays


def _checked(
    result: tuple[float, dict[str, np.ndarray]], key: str
) -> tuple[float, dict[str, np.ndarray]]:
    """The result, after one warning line when it did not converge."""
    value, arrays = result
    if not bool(arrays["converged"]):
        warnings.warn(
            f"solver stopped at its iteration cap without converging (value {value:.6f}, "
            f"iterations {int(arrays['iterations'])}, residual {float(arrays['residual']):.3g});"
            f" not cached: {key}",
            SolverConvergenceWarning,
            stacklevel=3,
        )
    return value, arrays

"""Starting Ray for a run: a local instance the driver's stop signals cannot reach, or a cluster.

Why the local Ray gets its own process groups: `timeout`, systemd, Slurm, container runtimes and
`tmux kill-session` signal the driver's whole process group. Ray's local processes (GCS, raylet,
and the workers the raylet starts) would share that group, die with the driver's SIGTERM, and
the driver's core worker would then abort (exit 134) before any record is written. Each process
`ray.init()` spawns therefore becomes the leader of a new process group (through an at-fork hook,
which CPython runs for every subprocess started with a `preexec_fn`, as Ray's always are). Ray
keeps its own fate-sharing (PR_SET_PDEATHSIG), so they still die if the driver is SIGKILLed, and
`ray.shutdown()` in the lifecycle stops them after the final checkpoint is saved.

Workers of a local Ray reuse the driver's interpreter and environment: under `uv run`, Ray's uv
runtime-env hook would otherwise package the working directory and start every worker with
`uv run` (a hidden environment rebuild per worker, with network access). On an existing cluster
(`--ray-address`), the cluster's own environment runs the code: see docs/architecture.md.
"""

from __future__ import annotations

import os
import signal
import sys

from rl_harness.harness import console
from rl_harness.harness.interrupts import in_main_thread, reinstall_after

UV_HOOK_VARIABLE = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"

_children_get_own_group = False
_hook_registered = False


def _child_after_fork() -> None:
    if _children_get_own_group:
        os.setpgrp()


def _spawn_in_own_process_groups(enabled: bool) -> None:
    global _children_get_own_group, _hook_registered
    if enabled and not _hook_registered:
        os.register_at_fork(after_in_child=_child_after_fork)
        _hook_registered = True
    _children_get_own_group = enabled


def prefer_driver_environment() -> None:
    """Workers of a local Ray run the driver's interpreter (no `uv run` per worker).

    Ray reads the variable once, when `ray` is first imported: the CLI calls this before the
    recipe imports Ray; `start_ray` also corrects an already-imported Ray.
    """
    os.environ.setdefault(UV_HOOK_VARIABLE, "0")
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and os.environ[UV_HOOK_VARIABLE] == "0":
        constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False


def _no_native_signal_handlers_in_driver() -> None:
    """Keep Ray's native failure-signal handler out of this (driver) process.

    It prints a native stack trace on a plain SIGTERM, and `ray.shutdown()` resets SIGTERM to
    the default action, so a second SIGTERM during cleanup would kill the process before its
    exit code is set. Ray reads the setting when the driver's core worker starts; setting the
    module value instead of the environment variable keeps the handler in Ray's own processes.
    Python's faulthandler reports real crashes (SIGSEGV, SIGABRT, ...) instead.
    """
    import faulthandler

    from ray._private import ray_constants

    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    if not faulthandler.is_enabled():
        faulthandler.enable()


def start_ray(address: str | None) -> None:
    """Connect to `address`, or start a local Ray; once per process. Our SIGTERM handler
    survives: whatever handled SIGTERM before `ray.init()` handles it afterwards. In a quiet
    CLI run (console.py) Ray's notices stay off the console and its workers' output in its
    session logs."""
    import ray

    if ray.is_initialized():
        return
    saved = signal.getsignal(signal.SIGTERM) if in_main_thread() else None
    _no_native_signal_handlers_in_driver()
    console.apply_quiet_ray()
    log_to_driver = console.ray_log_to_driver()
    try:
        if address:
            ray.init(address=address, log_to_driver=log_to_driver)
        else:
            prefer_driver_environment()
            _spawn_in_own_process_groups(True)
            try:
                ray.init(include_dashboard=False, log_to_driver=log_to_driver)
            finally:
                _spawn_in_own_process_groups(False)
    finally:
        reinstall_after(saved)
        console.apply_quiet_ray()  # also on the handlers `ray.init()` may have set up

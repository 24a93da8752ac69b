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

A busy machine: at a load of 20 on 2 cores Ray's processes start slowly (a raylet that waits
for its dashboard agent's port file crashes, a raylet that registers late times the driver
out: "The current node timed out during startup"). A local start here lengthens Ray's own
start-up waits (START_SETTINGS: Ray's settings, read from the environment by each process it
starts; a value already set is kept) and tries START_ATTEMPTS times (the leftover processes of
a failed try killed by PID first). The driver's own wait for the node to register is fixed at
30 s in Ray 2.60 (ray/_private/node.py) and no setting lengthens it: the retry covers that;
when every try fails, one `RayStartError` line names the load average. `--ray-address` is
checked before the recipe is imported (`check_ray_address`):
HOST:PORT that resolves and accepts a TCP connection within seconds, or `auto`; never a Ray
Client `ray://` address.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from rl_harness.harness import console
from rl_harness.harness.interrupts import RunInterrupted, in_main_thread, reinstall_after

UV_HOOK_VARIABLE = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
# Ray's start-up waits (its settings, `RAY_<name>`), each long enough for a loaded machine.
START_SETTINGS = {
    "RAY_gcs_server_port_wait_time_s": "120",  # the GCS publishes its port (Ray: 30 s)
    "RAY_raylet_start_wait_time_s": "60",  # the raylet registers with the GCS (Ray: 30 s)
    "RAY_agent_register_timeout_ms": "120000",  # an agent registers (else it is restarted)
    "RAY_worker_register_timeout_seconds": "120",  # a worker process registers
}
START_ATTEMPTS = 2  # a local start that fails is tried once more before the run fails
CONNECT_TIMEOUT_S = 5.0  # --ray-address: the cluster's GCS must accept a connection by then

log = console.get_logger(__name__)


class RayAddressError(ValueError):
    """A `--ray-address` that names no reachable Ray cluster (one CLI line, exit code 2)."""


class RayStartError(RuntimeError):
    """Ray did not start or connect: one line naming the machine's load (the run fails)."""


def check_ray_address(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """`address` is `auto` or HOST:PORT whose host resolves and whose port accepts a TCP
    connection within `timeout` seconds; RayAddressError saying which part is wrong.

    Ray itself would retry a dead address for minutes, and turn a malformed one or a Ray
    Client `ray://` address (the harness drives runs from a node of the cluster) into a
    traceback inside the run.
    """
    if address is None or address == "auto":
        return
    syntax = "HOST:PORT (the cluster's GCS address, e.g. 10.0.0.5:6379) or auto"
    if "://" in address:
        raise RayAddressError(
            f"--ray-address {address!r}: a Ray Client (ray://) address is not supported; run "
            f"rl-harness on a node of the cluster and give {syntax}"
        )
    host, sep, port_text = address.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise RayAddressError(f"--ray-address takes {syntax}, got {address!r}")
    try:
        socket.getaddrinfo(host, int(port_text), type=socket.SOCK_STREAM)
    except OSError as error:
        raise RayAddressError(
            f"--ray-address {address}: unknown host {host!r} ({error.strerror or error})"
        ) from None
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout):
            pass
    except OSError as error:
        why = (
            f"no answer within {timeout:g} s"
            if isinstance(error, TimeoutError)
            else (error.strerror or str(error)).lower()
        )
        raise RayAddressError(
            f"--ray-address {address}: no Ray cluster answers there ({why}); "
            "is its head node up (`ray status` there)?"
        ) from None


def load_text() -> str:
    """The machine's load, e.g. "load average 12.5 / 8.1 / 3.0 (1/5/15 min) on 2 CPUs"."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return f"load average unknown on {os.cpu_count()} CPUs"
    return (
        f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1/5/15 min) on {os.cpu_count()} CPUs"
    )


def _child_pids() -> set[int]:
    """This process's live children (Linux /proc; empty elsewhere)."""
    me, found = os.getpid(), set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me:
            found.add(int(stat.parent.name))
    return found


def _kill_started(before: set[int]) -> None:
    """Kill what a failed start left running: the children it spawned (each leads its own
    process group: the raylet's workers go with it)."""
    for pid in _child_pids() - before:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


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
    # Any: the constant is set on a module object mypy knows only as ModuleType.
    constants: Any = sys.modules.get("ray._private.ray_constants")
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
    began = time.monotonic()
    saved = signal.getsignal(signal.SIGTERM) if in_main_thread() else None
    _no_native_signal_handlers_in_driver()
    console.apply_quiet_ray()
    log_to_driver = console.ray_log_to_driver()
    try:
        if address:
            log.info(f"connecting to the Ray cluster at {address}")
            ray.init(address=address, log_to_driver=log_to_driver)
        else:
            start_local_ray(include_dashboard=False, log_to_driver=log_to_driver)
    except SystemExit as exit_:
        # `ray.init()` answers SIGTERM with sys.exit(SIGTERM) until our handler is back.
        if exit_.code == signal.SIGTERM:
            raise RunInterrupted(signal.SIGTERM) from None
        raise
    except ConnectionError as error:  # the cluster went away after check_ray_address
        raise RayStartError(
            f"could not connect to the Ray cluster at {address}: {_one_line(error)} ({load_text()})"
        ) from error
    finally:
        reinstall_after(saved)
        console.apply_quiet_ray()  # also on the handlers `ray.init()` may have set up
    log.info(f"Ray is up ({time.monotonic() - began:.0f} s)")


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def start_local_ray(**init_kwargs: Any) -> None:
    """`ray.init(**init_kwargs)` of a local Ray with START_SETTINGS, tried START_ATTEMPTS
    times (what a failed try left running killed first); RayStartError naming the load when
    every try fails. The harness's local start, and the test suite's shared Ray."""
    import ray

    prefer_driver_environment()
    for name, value in START_SETTINGS.items():
        os.environ.setdefault(name, value)
    wait = int(os.environ["RAY_raylet_start_wait_time_s"])
    for attempt in range(1, START_ATTEMPTS + 1):
        log.info(
            f"starting a local Ray (try {attempt} of {START_ATTEMPTS}, raylet wait {wait} s; "
            f"{load_text()})"
        )
        before = _child_pids()
        _spawn_in_own_process_groups(True)
        try:
            ray.init(**init_kwargs)
            return
        except BaseException as error:  # Ray's start raises plain Exception on a timeout
            ray.shutdown()
            _kill_started(before)  # also when a stop signal cut the start short
            if not isinstance(error, Exception):
                raise
            if attempt == START_ATTEMPTS:
                raise RayStartError(
                    f"Ray did not start in {START_ATTEMPTS} tries ({load_text()}; waits of "
                    f"RAY_raylet_start_wait_time_s={wait} s): {_one_line(error)}"
                ) from error
            log.warning(
                f"rl-harness: Ray did not start ({_one_line(error)}); {load_text()}: "
                "trying once more"
            )
        finally:
            _spawn_in_own_process_groups(False)

"""How a run ends under SIGTERM/SIGINT: one status vocabulary, one interrupt, one handler.

The lifecycle installs `handle_stop_signal` for SIGTERM and SIGINT. The first signal of a run
raises `RunInterrupted` (immediately, or after the current training iteration while the direct
runner defers it, or once Tune has checkpointed each running trial during `tuner.fit()`);
later signals only log a note, so the cleanup that saves the final checkpoint and writes the
records is never cut short. SIGKILL remains the way to force an exit.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

RUNNING: Final = "running"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
INTERRUPTED: Final = "interrupted"
FINAL_STATUSES: Final = (COMPLETED, FAILED, INTERRUPTED)
# Never written by a run itself: readers report it for a `running` record whose process is
# gone (liveness.py), and `rl-harness runs --mark-crashed` records it.
CRASHED: Final = "crashed"
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
_TUNE_SIGNALS: Final = ("SIGTERM", "SIGINT", "SIGUSR1")  # what a fit may leave changed
# Exit codes of every `rl-harness` command; a stopped run exits 128 + its signal.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

Handler = Callable[[int, Any], Any] | int | None


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by SIGTERM or SIGINT. A KeyboardInterrupt, so every `except
    KeyboardInterrupt` treats a polite kill like Ctrl-C; it names its signal."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        super().__init__(f"received {self.signal_name}")

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # 143 for SIGTERM, 130 for SIGINT, as shells report


@dataclass
class _State:
    received: int | None = None  # the run's first stop signal
    defer: bool = False  # direct runner inside algo.train(): stop after the iteration
    tune: bool = False  # inside tuner.fit(): checkpoint the trials, then stop Tune
    tune_started: bool = False  # a trial reported a result: there is training to save
    tune_stopping: bool = False  # Tune was asked to stop
    tune_handler: Handler = None  # Tune's own SIGINT handler (sets its stop event)


_state = _State()


def _note(text: str) -> None:
    logging.getLogger(__name__).warning(f"rl-harness: {text}")


def handle_stop_signal(signum: int, frame: Any) -> None:
    """The run's SIGTERM/SIGINT handler (see the module docstring)."""
    name = signal.Signals(signum).name
    if _state.received is not None:
        _note(f"{name} while stopping: finishing the records first (SIGKILL forces an exit)")
        return
    _state.received = signum
    if _state.tune:
        if _state.tune_started:
            _note(f"{name}: checkpointing each running trial at its next result, then stopping")
        else:
            _note(f"{name}: stopping Tune (no trial has trained yet)")
            stop_tune()
        return
    if _state.defer:
        _note(f"{name}: stopping once the current step ends, then saving a checkpoint")
        return
    raise RunInterrupted(signum)


def stop_tune() -> None:
    """Ask Tune to stop gracefully, as its Ctrl-C handler does (once)."""
    if _state.tune_stopping:
        return
    handler = _state.tune_handler
    if handler is None:
        handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not handle_stop_signal:
        _state.tune_stopping = True
        handler(signal.SIGINT, None)


def take_over_tune_sigint() -> None:
    """At Tune's experiment setup (Tune has installed its SIGINT handler): route SIGINT through
    `handle_stop_signal` too, so Ctrl-C also checkpoints the trials before Tune stops."""
    if not (_state.tune and in_main_thread()):
        return
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not handle_stop_signal:
        _state.tune_handler = handler
        signal.signal(signal.SIGINT, handle_stop_signal)


def tune_result_seen() -> None:
    _state.tune_started = True


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install() -> dict[int, Handler]:
    """Install the stop handler for a new run; returns the handlers to `restore` after it."""
    _state.received, _state.defer, _state.tune = None, False, False
    if not in_main_thread():
        return {}
    return {signum: signal.signal(signum, handle_stop_signal) for signum in STOP_SIGNALS}


def restore(previous: dict[int, Handler], *, ignore: bool = False) -> None:
    """Put back the handlers `install` replaced (`ignore`: ignore stop signals instead)."""
    _state.received, _state.defer, _state.tune = None, False, False
    for signum, handler in previous.items():
        if ignore:
            handler = signal.SIG_IGN
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def reinstall_after(saved: Handler) -> None:
    """Put back the SIGTERM handler `ray.init()` replaced.

    Ray swaps in `sys.exit(15)` and its core worker adds a native handler that prints a stack
    trace; `signal.signal` re-registers Python's own C handler, removing both.
    """
    if in_main_thread() and saved is not None:
        signal.signal(signal.SIGTERM, saved)


def forget_outside_a_run() -> None:
    """At a runner's start outside a CLI run (a notebook, a script), nothing is received yet:
    drop the stop signal an earlier interrupted run in this process left noted, which would
    otherwise stop this run after its first iteration. Inside a CLI run the lifecycle owns it."""
    if signal.getsignal(signal.SIGTERM) is not handle_stop_signal:
        _state.received = None


def stop_requested() -> int | None:
    """The stop signal received so far in this run, if any."""
    return _state.received


def raise_if_stopping() -> None:
    if _state.received is not None:
        raise RunInterrupted(_state.received)


@contextmanager
def held() -> Iterator[None]:
    """Within the block a stop signal is only noted (for cleanup that must finish)."""
    before, _state.defer = _state.defer, True
    try:
        yield
    finally:
        _state.defer = before


@contextmanager
def deferred() -> Iterator[None]:
    """Like `held`, then stop on leaving the block if a signal came.

    The direct runner wraps each iteration (train, record, periodic checkpoint): the final
    checkpoint then holds whole iterations only, and a resumed run's first iteration follows
    the saved one exactly.
    """
    with held():
        yield
    raise_if_stopping()


@contextmanager
def tune_mode() -> Iterator[None]:
    """Around `tuner.fit()`: a stop signal makes the harness's Tune callback request a
    checkpoint of each running trial at its next result, then asks Tune to stop gracefully
    (immediately when no trial has reported yet).

    On leaving, every handler the fit changed is put back: SIGTERM (ours during the fit), and
    the SIGINT and SIGUSR1 handlers Tune installs and leaves behind (without this, after one
    Tune run every later Ctrl-C in the process is swallowed)."""
    forget_outside_a_run()
    saved: dict[int, Handler] = {}
    if in_main_thread():
        signums = [getattr(signal, name) for name in _TUNE_SIGNALS if hasattr(signal, name)]
        saved = {signum: signal.getsignal(signum) for signum in signums}
        signal.signal(signal.SIGTERM, handle_stop_signal)
    _state.tune, _state.tune_started, _state.tune_stopping = True, False, False
    _state.tune_handler = None
    try:
        yield
    finally:
        _state.tune, _state.tune_handler = False, None
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

"""What a run shows on the console: the library's logging, progress lines, quiet Ray.

Library output goes through `logging` (logger `rl_harness`, a child per module), so a
notebook or script decides what it sees; `configure_logging()` (the CLI calls it) shows INFO
lines on stdout and warnings on stderr. In a CLI run Ray's start-up notices (token
authentication, "Started a local Ray instance", the new-API-stack notice, the
`RLModule(config=)` deprecation, gputil) are kept off the console unless `--verbose`; every
Ray log record of the driver is kept, with Ray's session logs, under
artifacts/<run-id>/ray_logs/ when the run started its own Ray.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl_harness.harness.metric_keys import (
    ENV_STEPS_KEY,
    ITERATION_ENV_STEPS_KEY,
    ITERATION_KEY,
    ITERATION_TIME_KEY,
)

LOGGER_NAME = "rl_harness"
RAY_LOGGER = "ray"
_MAX_KEPT_LINES = 50_000  # Ray driver log lines kept in memory until the run's end

# Ray's notices at start-up and on building an RLlib algorithm: useful once, noise every run.
RAY_NOTICES = (
    re.compile(r"Token authentication is enabled"),
    re.compile(r"Generated new authentication token"),
    re.compile(r"Started a local Ray instance"),
    re.compile(r"on the new API stack! This is the new default"),
    re.compile(r"RLModule\(config=\[RLModuleConfig object\]\)"),
    re.compile(r"Install gputil for GPU system monitoring"),
)

QUIET_ENVIRON = {"RAY_AIR_NEW_OUTPUT": "0"}


def get_logger(module: str) -> logging.Logger:
    """The logger of a library module: `rl_harness.<module path below rl_harness>`."""
    return logging.getLogger(module if module.startswith(LOGGER_NAME) else LOGGER_NAME)


class ConsoleHandler(logging.Handler):
    """INFO and below to stdout, WARNING and above to stderr; the streams are looked up at
    each record, so redirections made later (pytest's capture, a notebook cell) see them.

    A reader that left (`rl-harness TARGET | head -1`) ends that stream's output quietly:
    the run goes on and records everything, its later lines go nowhere."""

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        try:
            text = self.format(record)
            stream.write(text + "\n")
            stream.flush()
        except BrokenPipeError:
            _silence(stream)
        except Exception:
            self.handleError(record)


def _silence(stream: Any) -> None:
    """Point a stream whose reader left at /dev/null (Python's own recipe for SIGPIPE, the
    signal module docs): later writes and the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (a notebook's stream)
        pass


def configure_logging(verbose: bool = False) -> None:
    """Show the library's messages (progress lines, run status, warnings) on the console.

    The CLI calls it for every run; call it in a notebook or script to see progress there.
    `verbose` also shows debug lines. Calling it again replaces the earlier handler.
    """
    library = logging.getLogger(LOGGER_NAME)
    for handler in list(library.handlers):
        if isinstance(handler, ConsoleHandler):
            library.removeHandler(handler)
    handler = ConsoleHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    library.addHandler(handler)
    library.setLevel(logging.DEBUG if verbose else logging.INFO)
    library.propagate = False  # shown once, not again by a root handler


class _NoticeFilter(logging.Filter):
    """Lets through Ray's warnings and errors, except the known start-up notices."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        message = record.getMessage()
        return not any(pattern.search(message) for pattern in RAY_NOTICES)


class _KeepLines(logging.Handler):
    """Every Ray record of the driver, formatted as Ray does, for ray_logs/driver.log."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(
            logging.Formatter("%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s")
        )

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) < _MAX_KEPT_LINES:
            self.lines.append(self.format(record))


@dataclass
class _Quiet:
    wanted: bool = False
    notice_filter: _NoticeFilter = field(default_factory=_NoticeFilter)
    filtered: list[logging.Handler] = field(default_factory=list)
    kept: _KeepLines | None = None
    keeping: list[logging.Logger] = field(default_factory=list)  # loggers `kept` is on
    warnings_saved: warnings.catch_warnings | None = None  # entered; exited on release
    environ: dict[str, str | None] = field(default_factory=dict)  # variables set, old values


_quiet = _Quiet()


def quiet_ray(wanted: bool = True) -> None:
    """For this run (a CLI run without --verbose): keep Ray's notices off the console.

    Applied now if Ray is imported, else when the harness starts Ray (`apply_quiet_ray`).
    """
    release_quiet_ray()
    _quiet.wanted = wanted
    if wanted:
        # Tune's console reporter (a configuration box, "View detailed results here", ...):
        # the legacy reporter at verbose=0 prints nothing; our progress lines stay.
        for name, value in QUIET_ENVIRON.items():
            _quiet.environ[name] = os.environ.get(name)
            os.environ[name] = value
        _quiet.warnings_saved = warnings.catch_warnings()
        _quiet.warnings_saved.__enter__()  # the filters as they were, back on release
        # The same notices when they arrive as Python warnings (e.g. from RLlib's modules).
        warnings.filterwarnings("ignore", message=r".*RLModule\(config=")
        warnings.filterwarnings("ignore", message=r".*gputil")
        apply_quiet_ray()


def _ray_loggers() -> list[logging.Logger]:
    """Ray's logger and those of its children with handlers of their own (`ray.rllib`)."""
    children = [
        logger
        for name, logger in sorted(logging.Logger.manager.loggerDict.items())
        if name.startswith(RAY_LOGGER + ".")
        and isinstance(logger, logging.Logger)
        and logger.handlers
    ]
    return [logging.getLogger(RAY_LOGGER), *children]


def apply_quiet_ray() -> None:
    """Filter the console handlers of Ray's loggers and keep their records (idempotent).

    Called again after `ray.init()` and whenever Ray may have added a handler."""
    if not _quiet.wanted or RAY_LOGGER not in sys.modules:
        return
    if _quiet.kept is None:
        _quiet.kept = _KeepLines()
    for logger in _ray_loggers():
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler not in _quiet.filtered:
                handler.addFilter(_quiet.notice_filter)
                _quiet.filtered.append(handler)
        # Records of a logger that does not propagate never reach `ray`: keep them there.
        top = logger.name == RAY_LOGGER or not logger.propagate
        if top and logger not in _quiet.keeping:
            logger.addHandler(_quiet.kept)
            _quiet.keeping.append(logger)


def ray_log_to_driver() -> bool:
    """`ray.init(log_to_driver=...)`: Ray's worker output reaches the console unless quiet
    (it stays in Ray's session logs, which the run keeps under its artifacts)."""
    return not _quiet.wanted


def release_quiet_ray() -> list[str]:
    """Undo `quiet_ray`; returns the Ray driver log lines kept meanwhile."""
    for handler in _quiet.filtered:
        handler.removeFilter(_quiet.notice_filter)
    _quiet.filtered.clear()
    lines: list[str] = []
    if _quiet.kept is not None:
        for logger in _quiet.keeping:
            logger.removeHandler(_quiet.kept)
        _quiet.keeping.clear()
        lines = _quiet.kept.lines
        _quiet.kept = None
    for name, value in _quiet.environ.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _quiet.environ.clear()
    if _quiet.warnings_saved is not None:
        _quiet.warnings_saved.__exit__(None, None, None)
        _quiet.warnings_saved = None
    _quiet.wanted = False
    return lines


def ray_logs_dir() -> Path | None:
    """The log folder of the Ray session this process is connected to, if any."""
    try:
        import ray

        node = ray._private.worker.global_worker.node  # no public accessor in Ray 2.60
        return None if node is None else Path(node.get_logs_dir_path())
    except Exception:
        return None


def _special(folder: str, names: list[str]) -> list[str]:
    """Sockets and other special files in Ray's session folder: not copied."""
    return [n for n in names if not (Path(folder, n).is_file() or Path(folder, n).is_dir())]


def keep_ray_logs(dest: Path, session_logs: Path | None, driver_lines: list[str]) -> None:
    """Copy Ray's session logs and the kept driver log lines into `dest` (best effort)."""
    log = get_logger(__name__)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        if driver_lines:
            from rl_harness.harness.layout import RAY_DRIVER_LOG

            (dest / RAY_DRIVER_LOG).write_text("\n".join(driver_lines) + "\n", encoding="utf-8")
        if session_logs is not None and session_logs.is_dir():
            shutil.copytree(session_logs, dest / "session", dirs_exist_ok=True, ignore=_special)
    except OSError as error:
        log.warning(f"warning: could not keep Ray's logs in {dest}: {error}")


# ---------------------------------------------------------------------------------------------
# Progress lines

BAR_WIDTH = 20


def duration_text(seconds: float) -> str:
    """0.4s, 12s, 3m05s, 1h02m."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def progress_bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = int(round(min(max(fraction, 0.0), 1.0) * width))
    return "[" + "#" * filled + "." * (width - filled) + "]"


@dataclass
class Progress:
    """The progress line of one run (or one Tune trial): env steps/s and an ETA.

    Rates come from wall-clock time between this object's rows (the first row uses its own
    `time_this_iter_s`). The ETA follows the stop criterion: iterations to go times the mean
    iteration time so far, or env steps to go over the mean rate.
    """

    label: str
    iteration_target: int | None = None
    steps_target: float | None = None
    bar: bool = False  # a text progress bar (stdout is a terminal)
    _last_time: float | None = None
    _last_steps: float | None = None
    _seconds: float = 0.0  # wall time of the iterations seen
    _iterations: int = 0
    _steps: float = 0.0  # env steps of the iterations seen

    def line(self, row: Mapping[str, Any]) -> str:
        now = time.monotonic()
        steps = row.get(ENV_STEPS_KEY)
        elapsed = (
            now - self._last_time
            if self._last_time is not None
            else float(row.get(ITERATION_TIME_KEY) or 0.0)
        )
        rate = None
        if isinstance(steps, int | float):
            done = steps - self._last_steps if self._last_steps is not None else None
            if done is None:
                sampled = row.get(ITERATION_ENV_STEPS_KEY)
                done = float(sampled) if isinstance(sampled, int | float) else None
            if done is not None and elapsed > 0:
                rate = done / elapsed
                self._steps += done
            self._last_steps = float(steps)
        self._last_time = now
        self._seconds += max(elapsed, 0.0)
        self._iterations += 1
        return self._format(row, rate)

    def _fraction_and_eta(self, row: Mapping[str, Any]) -> tuple[float | None, float | None]:
        iteration = row.get(ITERATION_KEY)
        if self.iteration_target and isinstance(iteration, int | float):
            left = self.iteration_target - iteration
            per_iteration = self._seconds / self._iterations
            return iteration / self.iteration_target, max(left, 0) * per_iteration
        steps = row.get(ENV_STEPS_KEY)
        if self.steps_target and isinstance(steps, int | float):
            mean_rate = self._steps / self._seconds if self._seconds > 0 else 0.0
            left = max(self.steps_target - steps, 0.0)
            eta = left / mean_rate if mean_rate > 0 else None
            return steps / self.steps_target, eta
        return None, None

    def _format(self, row: Mapping[str, Any], rate: float | None) -> str:
        from rl_harness.harness.metrics import progress_parts

        fraction, eta = self._fraction_and_eta(row)
        head = f"[{self.label}]"
        if self.bar and fraction is not None:
            head += " " + progress_bar(fraction)
        parts = progress_parts(row, self.iteration_target)
        if rate is not None and math.isfinite(rate):
            # after "steps N", or after the iteration when the row has no step count
            at = next((i + 1 for i, p in enumerate(parts) if p.startswith("steps ")), 1)
            parts.insert(at, f"{rate:,.0f} steps/s")
        if eta is not None:
            parts.append(f"ETA {duration_text(eta)}")
        return f"{head} " + " | ".join(parts)


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_text(key: str, value: Any) -> str:
    return f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}"


def result_summary(
    result: Mapping[str, Any], limit: int = 4, headline: Sequence[str] = ()
) -> str | None:
    """The closing line's numbers: the recipe's declared `headline` keys ("a/b" reaches into
    a nested mapping; a mapping shows its numbers), else its first `limit` top-level
    numbers; the rest stay in result.json. A result of named metrics (results.py): each
    headline name's value, or the values of the names under it ("a" shows "a/b", "a/c")."""
    from rl_harness.harness.results import Results, is_named

    if is_named(result):
        named = Results.from_json(result)
        values = {name: metric.value for name, metric in named.items()}
        result = {name: values[name] for name in values if "/" not in name}
        if headline:
            shown = []
            for key in headline:
                under = [name for name in values if name.startswith(key + "/")]
                if key not in values and under:
                    shown += [_number_text(n, values[n]) for n in under if _number(values[n])]
                elif _number(values.get(key)):
                    shown.append(_number_text(key, values[key]))
                else:
                    shown.append(f"{key} -")
            return " | ".join(shown) or None
    if headline:
        shown = []
        for key in headline:
            value: Any = result
            for part in key.split("/"):
                value = value.get(part) if isinstance(value, Mapping) else None
            if isinstance(value, Mapping):
                shown += [_number_text(f"{key}/{k}", v) for k, v in value.items() if _number(v)]
            else:
                shown.append(_number_text(key, value) if _number(value) else f"{key} -")
        return " | ".join(shown) or None
    numbers = [(str(key), value) for key, value in result.items() if _number(value)]
    if not numbers:
        return None
    shown = [_number_text(key, value) for key, value in numbers[:limit]]
    if len(numbers) > limit:
        shown.append(f"(+{len(numbers) - limit} more in result.json)")
    return " | ".join(shown)


def text_table(header: Sequence[Any], rows: Sequence[Sequence[Any]], *, rule: bool = False) -> str:
    """Left-aligned columns two spaces apart, trailing blanks stripped; `rule`: a line of
    dashes under the header. The one table printer of every command (runs, compare, vast)."""
    cells = [[str(cell) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)

"""`rl-harness sweep`: many runs of recipes (arms x seeds), each exactly as if run alone.

Design: every run is its own child process, `python -m rl_harness.cli TARGET --seed S
--run-id ID OPTIONS...`, so it gets the full records of a CLI run (manifest, config,
metrics, checkpoints, result, its own Ray) and one run's failure or crash cannot touch
another. The sweep only schedules them:

- locally (no `--ray-address`): a pool of `cpu_count // cpus_per_run` children at a time;
- on an existing cluster (`--ray-address`): one Ray task per run, declaring
  `num_cpus=cpus_per_run`, so Ray bounds the concurrency by the cluster's CPUs and places
  each child on a node with room. Each child then starts its own local Ray on that node
  (as a run started there by hand would), and writes its records on that node: the
  experiment repo must sit at the same path on every node (a shared or synced folder).

A run whose record says `completed` for the same recipe file, seed, options and command line
(its words and `--set` overrides in any order, but the run id) is not run again, so a rerun
of the same command does only what is missing (failed, crashed or never started). Each
child's console goes to artifacts/<run-id>/console.log.

Arms over values, as Hydra's multirun: `--set KEY=V1,V2` runs each value (the product over
several swept keys), each arm x seed a full run whose manifest holds its `--set` values
(`plan_arms`). A comma inside ( ) or [ ] belongs to the value, and a tuple-typed setting
takes its commas as one tuple (`--set hidden=64,64` is one value, as in a run), so tuples are
swept in brackets: `--set hidden=(64,64),(128,128)`. Every arm is checked against each
recipe's budget before any run starts.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from rl_harness.harness.atomic import RecordReadError
from rl_harness.harness.budgets import field_types, split_override
from rl_harness.harness.context import RunOptions, new_run_id
from rl_harness.harness.hardware import TORCH_THREADS_ENV
from rl_harness.harness.interrupts import COMPLETED as COMPLETED  # the status the CLI reads
from rl_harness.harness.interrupts import FAILED
from rl_harness.harness.layout import ARTIFACTS_PARENT, CONSOLE_LOG_NAME, RESULTS_PARENT
from rl_harness.harness.manifest import load_manifest
from rl_harness.harness.recipe import RecipeError, looks_like_target

PENDING, RUNNING, DONE_BEFORE = "pending", "running", "done before"
# Options that say where or how a run is watched, not what it computes: two runs that
# differ only in these are the same run for the sweep's "already completed" check.
NOT_COMPARED = frozenset(
    {"run_id", "results_dir", "artifacts_dir", "ray_address", "verbose", "upload_artifacts"}
    | {"log_to"}
)


class SweepError(ValueError):
    """Bad sweep input: one line, exit code 2."""


@dataclass(frozen=True)
class Arm:
    """One combination of `--set` values: every setting given (KEY, VALUE text), in the
    order given; `swept`: the keys that take several values (they name the arm)."""

    settings: tuple[tuple[str, str], ...] = ()
    swept: tuple[str, ...] = ()

    @property
    def overrides(self) -> tuple[str, ...]:
        """The `--set` texts of a run of this arm."""
        return tuple(f"{key}={value}" for key, value in self.settings)

    @property
    def shared(self) -> tuple[str, ...]:
        """The `--set` texts of the settings every arm shares (not swept)."""
        return tuple(f"{k}={v}" for k, v in self.settings if k not in self.swept)

    @property
    def label(self) -> str:
        """The swept settings ("lr=0.0001 hidden=64,64"), "-" when nothing is swept."""
        shown = [f"{key}={value}" for key, value in self.settings if key in self.swept]
        return " ".join(shown) or "-"


_OPEN, _CLOSE = "([", ")]"


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside ( ) and [ ] ("(1,2),(3,4)" -> ["(1,2)", "(3,4)"])."""
    pieces, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            pieces.append(text[start:index])
            start = index + 1
    pieces.append(text[start:])
    return [piece.strip() for piece in pieces]


def _is_tuple(kind: Any) -> bool:
    """A tuple-typed setting (`tuple[int, ...]`, or one `| None`)."""
    if typing.get_origin(kind) in (types.UnionType, typing.Union):
        return any(_is_tuple(arg) for arg in typing.get_args(kind))
    return typing.get_origin(kind) is tuple or kind is tuple


def swept_values(key: str, text: str, kind: Any) -> list[str]:
    """The values one `--set KEY=TEXT` of a sweep gives (value texts as a run's `--set`
    takes them). A tuple-typed setting: TEXT is one tuple unless it holds brackets, then
    each bracketed piece is one (`(64,64),(128,)`; `none` for an optional one). Any other
    setting: each top-level comma piece is one value. SweepError for an empty or repeated
    value, or an unbracketed piece among bracketed tuples."""
    if _is_tuple(kind):
        if not any(char in text for char in _OPEN):
            return [text]  # "64,64": one tuple, as a run reads it
        values = []
        for piece in split_top_level(text):
            if piece.lower() == "none":
                values.append(piece)
            elif len(piece) >= 2 and piece[0] in _OPEN and piece[-1] in _CLOSE:
                values.append(piece[1:-1].strip().removesuffix(",").strip())  # (8,) is (8)
            else:
                raise SweepError(
                    f"--set {key}={text}: write each tuple value of {key} in ( ), e.g. "
                    f"--set {key}=(64,64),(128,128); got {piece!r}"
                )
    else:
        values = split_top_level(text)
        if len(values) > 1 and "" in values:
            raise SweepError(f"--set {key}={text}: an empty value between commas")
    repeated = sorted({value for value in values if values.count(value) > 1})
    if repeated:
        raise SweepError(f"--set {key}={text}: the value {repeated[0]!r} is given twice")
    return values


def plan_arms(overrides: Sequence[str], settings: Any) -> list[Arm]:
    """The arms the sweep's `--set` texts give: the product of each key's values (the keys
    in the order given, the last varying fastest). `settings`: an instance of the recipe's
    budget dataclass (its field types say which settings are tuples); None when the recipe
    declares no budgets (then `--set` is refused by the budget check anyway)."""
    kinds = field_types(settings) if settings is not None else {}
    keys: list[str] = []
    choices: list[list[str]] = []
    for text in overrides:
        key, value = split_override(text)
        if key in keys:
            raise SweepError(f"--set {key} is given twice (give its values once: {key}=A,B)")
        keys.append(key)
        choices.append(swept_values(key, value, kinds.get(key, Any)))
    swept = tuple(key for key, values in zip(keys, choices, strict=True) if len(values) > 1)
    return [
        Arm(tuple(zip(keys, combo, strict=True)), swept) for combo in itertools.product(*choices)
    ]


@dataclass
class SweepRun:
    """One cell of the grid: a recipe at a seed (in an arm of `--set` values), and how its
    run went."""

    target: str
    seed: int
    source_file: Path
    results_base: Path
    artifacts_base: Path
    argv: list[str]  # the child's arguments after `rl-harness`
    options: dict[str, Any]  # RunOptions.to_dict() of the child, for the completed check
    arm: Arm = field(default_factory=Arm)
    run_id: str | None = None
    status: str = PENDING
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.ended or now) - self.started

    @property
    def console_log(self) -> Path:
        assert self.run_id is not None
        return self.artifacts_base / self.run_id / CONSOLE_LOG_NAME


@dataclass
class Sweep:
    runs: list[SweepRun]
    cpus_per_run: float = 1.0
    ray_address: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # extra environment of every child


def recipe_file(target: str) -> Path:
    """The experiment.py a target names, found without importing it (RecipeError if none)."""
    if not looks_like_target(target):
        raise RecipeError(
            f"{target!r} is neither a dotted module path nor a path to an experiment.py"
        )
    if target.endswith(".py") or "/" in target or Path(target).exists():
        path = Path(target).resolve()
        if not path.is_file():
            raise RecipeError(f"no such experiment file: {target}")
        return path
    try:
        spec = importlib.util.find_spec(target)
    except (ModuleNotFoundError, ValueError):
        spec = None
    if spec is None or not spec.origin or spec.submodule_search_locations is not None:
        raise RecipeError(f"cannot find experiment module {target!r}")
    return Path(spec.origin).resolve()


def plan_runs(
    targets: Sequence[str],
    seeds: Sequence[int],
    options_for: Callable[[str, int, Arm], RunOptions],
    passthrough: Sequence[str],
    arms: Sequence[Arm] = (Arm(),),
) -> list[SweepRun]:
    """The grid, arm-major: each target in each arm at each seed, with the child's argv
    (`passthrough`, which holds no `--set`, then the arm's) and options."""
    runs = []
    for target, arm, seed in itertools.product(targets, arms, seeds):
        source = recipe_file(target)
        options = options_for(target, seed, arm)
        results = Path(options.results_dir).resolve() if options.results_dir else None
        artifacts = Path(options.artifacts_dir).resolve() if options.artifacts_dir else None
        sets = [word for text in arm.overrides for word in ("--set", text)]
        runs.append(
            SweepRun(
                target=target,
                seed=seed,
                source_file=source,
                results_base=results or source.parent / RESULTS_PARENT,
                artifacts_base=artifacts or source.parent / ARTIFACTS_PARENT,
                argv=[target, "--seed", str(seed), *passthrough, *sets],
                options=options.to_dict(),
                arm=arm,
            )
        )
    return runs


def read_manifest_or_none(results_dir: Path) -> dict[str, Any] | None:
    """A run folder's manifest, or None when it has none or it cannot be read (a run still
    starting, a corrupt file): such a folder is never counted as completed."""
    try:
        return load_manifest(results_dir)
    except RecordReadError:
        return None


def _compared(options: Mapping[str, Any]) -> dict[str, Any]:
    compared = {key: value for key, value in options.items() if key not in NOT_COMPARED}
    # `--set` overrides name distinct keys (a key given twice is refused): their order says
    # nothing about the run.
    if isinstance(compared.get("set"), list):
        compared["set"] = sorted(compared["set"])
    return compared


# The flags of NOT_COMPARED options and how many values each takes.
NOT_COMPARED_FLAGS = {
    "--run-id": 1,
    "--results-dir": 1,
    "--artifacts-dir": 1,
    "--ray-address": 1,
    "--log-to": 1,
    "--verbose": 0,
    "--upload-artifacts": 0,
    "--no-upload-artifacts": 0,
}


def _compared_words(argv: Sequence[str]) -> list[str]:
    words, i = [], 0
    while i < len(argv):
        flag = argv[i].split("=", 1)[0]
        if flag in NOT_COMPARED_FLAGS:
            i += 1 + (NOT_COMPARED_FLAGS[flag] if "=" not in argv[i] else 0)
            continue
        words.append(argv[i])
        i += 1
    return sorted(words)


def _same_command(manifest: Mapping[str, Any], run: SweepRun) -> bool:
    """The recorded command asked for this run: the same words after `rl-harness` (in any
    order, watching-only flags aside), so an option recorded outside `options` (a setting
    override) still has to match."""
    argv = list((manifest.get("command") or {}).get("argv") or [])[1:]
    return _compared_words(argv) == _compared_words(run.argv)


def completed_run(run: SweepRun) -> str | None:
    """The id of a completed run of the same recipe file, seed, options and command line."""
    if not run.results_base.is_dir():
        return None
    wanted = _compared(run.options)
    # No --budget asked: the run records the budget it resolved (the recipe's default, or
    # smoke), so the name is not compared; the command words still are (a --budget there).
    by_default = wanted.get("budget") is None
    for folder in sorted(run.results_base.iterdir(), reverse=True):
        manifest = read_manifest_or_none(folder)
        if not manifest or manifest.get("status") != COMPLETED:
            continue
        experiment = manifest.get("experiment") or {}
        if experiment.get("source_file") != str(run.source_file):
            continue
        recorded = _compared(manifest.get("options") or {})
        if by_default:
            recorded["budget"] = None
        if recorded == wanted and _same_command(manifest, run):
            return str(manifest.get("run_id") or folder.name)
    return None


def child_command(run: SweepRun) -> list[str]:
    assert run.run_id is not None
    return [sys.executable, "-m", "rl_harness.cli", *run.argv, "--run-id", run.run_id]


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: this one, without a cluster address (each child starts its
    own local Ray where it runs), plus `extra`."""
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env.update(extra)
    return env


def run_child(command: list[str], console_log: str, cwd: str, env: dict[str, str]) -> int:
    """Run one child to its end, its console in `console_log`; returns its exit code."""
    Path(console_log).parent.mkdir(parents=True, exist_ok=True)
    with open(console_log, "ab") as log:
        return subprocess.run(
            command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False
        ).returncode


def _status_of(run: SweepRun) -> str:
    """The status the child's manifest records (a child killed before writing it: failed)."""
    assert run.run_id is not None
    manifest = read_manifest_or_none(run.results_base / run.run_id)
    status = manifest.get("status") if manifest else None
    return str(status) if status and status != RUNNING else FAILED


def local_parallelism(cpus_per_run: float) -> int:
    return max(1, int((os.cpu_count() or 1) // max(cpus_per_run, 1e-9)))


def execute(sweep: Sweep, on_change: Callable[[SweepRun], None], poll_s: float = 0.5) -> None:
    """Run every pending run (skipping completed ones), calling `on_change` at each status
    change; returns when all have ended. A failed run never stops the others."""
    for run in sweep.runs:
        done = completed_run(run)
        if done is not None:
            run.run_id, run.status = done, DONE_BEFORE
            on_change(run)
    todo = [run for run in sweep.runs if run.status == PENDING]
    if not todo:
        return
    env = child_environment(sweep.env)
    # The sweep divides the cores among its concurrent runs: each child's torch takes the
    # cores it was given, not the machine's (unless the caller chose the threads).
    env.setdefault(TORCH_THREADS_ENV, str(max(1, int(sweep.cpus_per_run))))
    if sweep.ray_address:
        _execute_on_ray(sweep, todo, env, on_change, poll_s)
    else:
        _execute_locally(sweep, todo, env, on_change, poll_s)


def _start(run: SweepRun, on_change: Callable[[SweepRun], None]) -> None:
    run.status, run.started = RUNNING, time.monotonic()
    on_change(run)


def _end(run: SweepRun, code: int | None, on_change: Callable[[SweepRun], None]) -> None:
    run.exit_code, run.ended = code, time.monotonic()
    run.status = _status_of(run)
    on_change(run)


def _execute_locally(
    sweep: Sweep,
    todo: list[SweepRun],
    env: dict[str, str],
    on_change: Callable[[SweepRun], None],
    poll_s: float,
) -> None:
    width = local_parallelism(sweep.cpus_per_run)
    waiting = list(todo)
    active: list[tuple[SweepRun, subprocess.Popen[bytes], BinaryIO]] = []
    try:
        while waiting or active:
            while waiting and len(active) < width:
                run = waiting.pop(0)
                run.run_id = new_run_id()  # its time: when it starts
                run.console_log.parent.mkdir(parents=True, exist_ok=True)
                log = run.console_log.open("ab")
                process = subprocess.Popen(
                    child_command(run),
                    cwd=os.getcwd(),
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                active.append((run, process, log))
                _start(run, on_change)
            for entry in list(active):
                run, process, output = entry
                code = process.poll()
                if code is not None:
                    output.close()
                    active.remove(entry)
                    _end(run, code, on_change)
            time.sleep(poll_s)
    finally:
        for run, process, output in active:  # the sweep itself was stopped: stop its children
            process.terminate()
            process.wait()
            output.close()
            _end(run, process.returncode, on_change)


def _execute_on_ray(
    sweep: Sweep,
    todo: list[SweepRun],
    env: dict[str, str],
    on_change: Callable[[SweepRun], None],
    poll_s: float,
) -> None:
    import ray

    ray.init(address=sweep.ray_address, log_to_driver=False)
    try:
        remote = ray.remote(run_child).options(num_cpus=sweep.cpus_per_run, max_retries=0)
        pending = {}
        for run in todo:
            run.run_id = new_run_id()
            ref = remote.remote(child_command(run), str(run.console_log), os.getcwd(), env)
            pending[ref] = run
        started: set[int] = set()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=poll_s)
            for run in pending.values():  # a queued task shows as running once its run does
                if id(run) not in started and (run.results_base / str(run.run_id)).exists():
                    started.add(id(run))
                    _start(run, on_change)
            for ref in ready:
                run = pending.pop(ref)
                if id(run) not in started:
                    _start(run, on_change)
                try:
                    code = ray.get(ref)
                except Exception:  # the task itself died (its node lost): the run failed
                    code = None
                _end(run, code, on_change)
    finally:
        ray.shutdown()

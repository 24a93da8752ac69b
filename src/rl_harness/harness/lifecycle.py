"""One run of a recipe: context, manifest at start and end, signals, artifact mirroring."""

from __future__ import annotations

import shutil
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from rl_harness.harness import console, interrupts
from rl_harness.harness.atomic import (
    json_value_keeping,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from rl_harness.harness.budgets import SMOKE_BUDGET, BudgetChoice, resolve_budget, settings_text
from rl_harness.harness.context import RunContext, RunOptions, UploadMode, make_context
from rl_harness.harness.hardware import apply_torch_threads
from rl_harness.harness.interrupts import (
    COMPLETED,
    EXIT_FAILED,
    EXIT_OK,
    FAILED,
    INTERRUPTED,
    RunInterrupted,
)
from rl_harness.harness.layout import ERROR_NAME, RESULT_NAME
from rl_harness.harness.manifest import read_manifest, write_manifest
from rl_harness.harness.preflight import PreflightError
from rl_harness.harness.provenance import finish_manifest, start_manifest
from rl_harness.harness.rayinit import RayStartError
from rl_harness.harness.recipe import (
    LoadedRecipe,
    Recipe,
    RecipeError,
    budget_declarations,
    load_recipe,
)
from rl_harness.harness.redaction import redact_env, redact_record
from rl_harness.harness.results import Results

log = console.get_logger(__name__)


def storage_config(mode: UploadMode) -> Any | None:
    """The B2 config to mirror artifacts with, or None; RecipeError if required but absent."""
    from rl_harness.harness.storage import StorageConfigError, resolve_upload_config

    wanted = {"always": True, "never": False, "auto": None}[mode]
    try:
        return resolve_upload_config(wanted)
    except StorageConfigError as error:
        raise RecipeError(redact_env(str(error))) from None


def _mirror(config: Any, context: RunContext, manifest: Mapping[str, Any]) -> dict[str, Any]:
    from rl_harness.harness.storage import mirror_run_artifacts

    remote_run_path = f"{manifest['experiment']['relative_dir']}/{context.run_id}"
    return mirror_run_artifacts(
        config,
        artifacts_dir=context.artifacts_dir,
        results_dir=context.results_dir,
        remote_run_path=remote_run_path,
        log=lambda line: log.info(f"[{context.run_id}] {line}"),
    )


def _error_record(error: BaseException, context: RunContext) -> dict[str, Any]:
    text = redact_env("".join(traceback.format_exception(error)))
    write_text_atomic(context.paths.error, text)
    return {
        "type": type(error).__name__,
        "message": redact_env(str(error)),
        "traceback_file": ERROR_NAME,
    }


def _interrupt_record(kind: str, signal_name: str) -> dict[str, Any]:
    return {"type": kind, "signal": signal_name, "message": f"received {signal_name}"}


def _save_result(
    context: RunContext, result: Any, headline: tuple[str, ...] = ()
) -> tuple[str | None, dict[str, str]]:
    """Keep a `Results` (named metrics, results.py) or a mapping result as result.json:
    every key with an exact JSON form; a value with none is left out, with a warning naming
    its key path. Returns the summary line of its headline numbers and the keys left out
    (key path -> why)."""
    if isinstance(result, Results):
        result = result.to_json()
    if not isinstance(result, Mapping):
        return None, {}
    values, dropped = json_value_keeping(redact_record(dict(result)))
    for key, why in dropped.items():
        log.warning(f"[{context.run_id}] {RESULT_NAME}: left out key {key!r}: {why}")
    write_json_atomic(context.paths.result, values)
    return console.result_summary(values, headline=headline), dropped


def _end_ray(ray_was_up: bool, context: RunContext) -> None:
    """Stop the Ray this run started and keep its logs; release the quiet console."""
    session_logs = None
    if not ray_was_up and _ray_initialized():
        session_logs = console.ray_logs_dir()
        sys.modules["ray"].shutdown()
    driver_lines = console.release_quiet_ray()
    if session_logs is not None:  # a caller's Ray session is theirs, logs included
        console.keep_ray_logs(context.paths.ray_logs, session_logs, driver_lines)


def _drop_rejected_run(context: RunContext) -> None:
    """A run refused by preflight before anything trained leaves no run folder, as a run
    refused by `make_context` does: nothing happened that a record could tell. One that
    trained first (a recipe's second runner call refused: metrics.jsonl exists) stays
    recorded failed. artifacts/<run-id>/ goes only when empty: a sweep keeps its child's
    console.log there, which says why."""
    if context.paths.metrics.exists():
        return
    shutil.rmtree(context.results_dir, ignore_errors=True)
    try:
        context.artifacts_dir.rmdir()
    except OSError:  # not empty: someone else's files (a sweep's console.log) stay
        pass


def _ray_initialized() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def load_for_run(target: str, options: RunOptions) -> tuple[LoadedRecipe, RunOptions]:
    """The checked options (bad ones refused before the recipe is imported) and the recipe
    `target` names; RecipeError (or the options' ValueError) for bad input."""
    options = options.checked()
    from rl_harness.harness.rayinit import check_ray_address

    check_ray_address(options.ray_address)  # a dead or malformed address: seconds, one line
    recipe = _load(target, options)
    return recipe, options


def settings_for_show(target: str, options: RunOptions) -> str:
    """`--show-settings`: the recipe's budgets (and the chosen one, `--budget`/`--set`
    checked as a run would), read without importing the recipe's torch or RLlib
    (recipe.budget_declarations); no folder, no Ray."""
    options = options.checked()

    def imported() -> tuple[str, Recipe[Any]]:  # when the declarations cannot be read apart
        loaded = _load(target, options)
        return loaded.module_name, loaded.declared

    with budget_declarations(target, imported) as (owner, declared):
        chosen = resolve_budget(declared, options.budget, options.overrides, owner=owner)
        return settings_text(declared, owner, chosen)


def recipe_budget(recipe: LoadedRecipe, options: RunOptions) -> BudgetChoice:
    """The budget the (checked) options ask of the recipe (BudgetError, before any folder
    or Ray)."""
    options = options.checked()
    return resolve_budget(
        recipe.declared, options.budget, options.overrides, owner=recipe.module_name
    )


def _load(target: str, options: RunOptions) -> LoadedRecipe:
    if options.ray_address is None:
        from rl_harness.harness.rayinit import prefer_driver_environment

        prefer_driver_environment()  # before the recipe imports Ray
    try:
        return load_recipe(target)
    except RecipeError:
        raise
    except Exception as error:  # the recipe module (or a helper it imports) failed to import
        log.debug(redact_env("".join(traceback.format_exception(error))).rstrip())
        raise RecipeError(
            f"importing {target} failed: {type(error).__name__}: {error}{_where(error)}"
        ) from None


def _where(error: BaseException) -> str:
    """Where an import failed: the innermost frame outside Python's import machinery, or the
    file and line a SyntaxError names (" (at path:line)"); --verbose shows the traceback."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" (at {error.filename}:{error.lineno})"
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<frozen ")
    ]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def execute_recipe(
    target: str, options: RunOptions, argv: list[str], *, process_exits: bool = False
) -> int:
    """Run the recipe `target` names once with full provenance; returns the process exit
    code. Bad input (target, options, B2 required but absent) raises before any folder is
    made: RecipeError, ValueError, FileExistsError (a run id taken), RayAddressError (a
    `--ray-address` nothing answers at). Bad input a runner finds before it starts Ray
    (preflight.py) is raised as the `PreflightError` (a ValueError: the CLI prints its one
    line, exit code 2), and the run's folders are removed again unless it had trained
    (metrics.jsonl: a recipe's later runner call refused), in which case it is recorded failed.
    Ray that does not start (rayinit.py) is a failed run with one error line.

    `process_exits`: the caller exits right after (the CLI command), so stop signals stay
    ignored instead of getting their old handlers back: a late SIGTERM cannot turn the exit
    code of a recorded run into a plain kill.
    """
    recipe, options = load_for_run(target, options)
    return _execute(recipe, options, argv, process_exits=process_exits)[0]


def _execute(
    recipe: LoadedRecipe, options: RunOptions, argv: list[str], *, process_exits: bool
) -> tuple[int, RunContext[Any]]:
    """`execute_recipe` once the recipe is loaded: (exit code, the run's context)."""
    budget = recipe_budget(recipe, options)
    b2 = storage_config(options.upload_artifacts)
    context = make_context(
        recipe.experiment_dir, options, experiment_module=recipe.module_name, budget_choice=budget
    )
    manifest = start_manifest(
        context, source_file=recipe.source_file, argv=argv, options=context.options.to_dict()
    )
    write_manifest(context.results_dir, manifest)
    log.info(
        f"[{context.run_id}] {recipe.module_name} seed={context.seed} "
        f"smoke={context.smoke} budget={context.budget or '-'} -> {context.results_dir}"
    )

    # The recipe uses torch: its threads are the plan's from here (the runners set them again
    # when they start), and a caller's own (a notebook's `train`) come back at the end.
    torch_threads = sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None
    if torch_threads is not None:
        apply_torch_threads(context.hardware)
    ray_was_up = _ray_initialized()  # a caller's Ray session is theirs to end
    console.quiet_ray(not options.verbose)
    previous = interrupts.install()
    status, error, code = FAILED, None, EXIT_FAILED
    summary: str | None = None
    rejected: PreflightError | None = None
    started = time.monotonic()
    try:
        try:
            summary, dropped = _save_result(
                context, recipe.declared.run(context), recipe.declared.headline
            )
            if dropped:  # the manifest names what result.json could not keep
                manifest["result_keys_left_out"] = dropped
            status, code = COMPLETED, EXIT_OK
        except PreflightError as failure:  # bad input the runner saw before Ray started
            rejected = failure
            error = {"type": "PreflightError", "message": redact_env(str(failure))}
        except RayStartError as failure:  # a busy machine or a lost cluster: one line
            error = _error_record(failure, context)
            log.error(f"rl-harness: error: {redact_env(str(failure))}")
        except RunInterrupted as interrupt:
            status, code = INTERRUPTED, interrupt.exit_code
            error = _interrupt_record(type(interrupt).__name__, interrupt.signal_name)
        except KeyboardInterrupt:  # raised by the recipe itself, or SIGINT outside our handler
            sigint = RunInterrupted(signal.SIGINT)
            status, code = INTERRUPTED, sigint.exit_code
            error = _interrupt_record("KeyboardInterrupt", sigint.signal_name)
        except SystemExit as exit_:  # a recipe calling sys.exit() did not complete
            error = {"type": "SystemExit", "message": f"sys.exit({exit_.code!r}) in the recipe"}
        except Exception as failure:  # the recipe's own failure: record it, show it
            error = _error_record(failure, context)
            log.error(redact_env("".join(traceback.format_exception(failure))).rstrip())
        finally:
            # A signal now only gets a note: records are written whatever arrives.
            with interrupts.held():
                _end_ray(ray_was_up, context)
                if b2 is not None:
                    manifest["artifacts"]["remote"] = _mirror(b2, context, manifest)
                write_manifest(context.results_dir, finish_manifest(manifest, status, error=error))
    finally:
        interrupts.restore(previous, ignore=process_exits)
        if torch_threads is not None:
            sys.modules["torch"].set_num_threads(torch_threads)
    if rejected is not None:  # the caller prints the one line
        _drop_rejected_run(context)
        raise rejected
    took = console.duration_text(time.monotonic() - started)
    log.info(f"[{context.run_id}] {status} in {took}: {context.results_dir}")
    if summary is not None:  # the run ends with its headline numbers
        log.info(f"[{context.run_id}] result: {summary}")
    return code, context


@dataclass(frozen=True)
class TrainedRun:
    """What `train` ran: the run's id, end status and folders (read them with
    `rl_harness.analysis.RunArtifacts.open(results_dir)`), and its result mapping."""

    run_id: str
    status: str  # completed, failed or interrupted (the manifest's)
    results_dir: Path
    artifacts_dir: Path
    result: dict[str, Any] | None  # result.json, None when the recipe returned no mapping
    error: dict[str, Any] | None = None  # the manifest's error record of a failed run


def cli_argv(target: str, options: RunOptions) -> list[str]:
    """The `rl-harness` command line that asks for the same run (recorded as its argv)."""
    argv = ["rl-harness", target]
    defaults = RunOptions()
    for name in (f.name for f in fields(RunOptions) if f.init):
        value = getattr(options, name)
        if value == getattr(defaults, name) or value is None:
            continue
        if name == "budget" and options.smoke and value == SMOKE_BUDGET:
            continue  # --smoke already says it
        flag = "--set" if name == "overrides" else "--" + name.replace("_", "-")
        if name == "upload_artifacts":
            argv.append("--upload-artifacts" if value == "always" else "--no-upload-artifacts")
        elif isinstance(value, bool):
            argv.append(flag)
        elif isinstance(value, tuple | list):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


def train(target: str, options: RunOptions | None = None, **fields_: Any) -> TrainedRun:
    """Run a recipe from a notebook or script exactly as `rl-harness TARGET` does: the same
    checks, manifest, records, Ray handling and closing lines (`configure_logging()` shows
    them), e.g. `train("experiments.example_study.smoke.experiment", smoke=True, seed=0)`.

    `target`: a dotted module path or an experiment.py path; `options` (default
    `RunOptions()`) with any field replaced by keyword. Bad input raises before any folder
    is made (RecipeError, ValueError), as on the command line; a recipe's own failure is
    recorded, not raised: look at `status` and `error`. `runs`, `show` and `compare` list
    the run like any other.
    """
    options = replace(options or RunOptions(), **fields_)
    recipe, options = load_for_run(target, options)
    _, context = _execute(recipe, options, cli_argv(target, options), process_exits=False)
    manifest = read_manifest(context.results_dir)
    result = read_json(context.paths.result) if context.paths.result.is_file() else None
    return TrainedRun(
        run_id=context.run_id,
        status=manifest["status"],
        results_dir=context.results_dir,
        artifacts_dir=context.artifacts_dir,
        result=result,
        error=manifest.get("error"),
    )

"""One run of a recipe: context, manifest at start and end, signals, artifact mirroring."""

from __future__ import annotations

import signal
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any

from rl_harness.harness import console, interrupts
from rl_harness.harness.atomic import (
    JSONValueError,
    to_json_value,
    write_json_atomic,
    write_text_atomic,
)
from rl_harness.harness.budgets import BudgetChoice, resolve_budget
from rl_harness.harness.context import RunContext, RunOptions, UploadMode, make_context
from rl_harness.harness.interrupts import (
    COMPLETED,
    EXIT_FAILED,
    EXIT_OK,
    FAILED,
    INTERRUPTED,
    RunInterrupted,
)
from rl_harness.harness.layout import ERROR_NAME, RESULT_NAME
from rl_harness.harness.manifest import write_manifest
from rl_harness.harness.provenance import finish_manifest, start_manifest
from rl_harness.harness.recipe import Recipe, RecipeError, load_recipe
from rl_harness.harness.redaction import redact_env, redact_record

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


def _save_result(context: RunContext, result: Any) -> str | None:
    """Keep a mapping result as result.json (JSONValueError, naming the key, if it holds a
    value with no exact JSON form); returns the summary line of its headline numbers."""
    if not isinstance(result, Mapping):
        return None
    try:
        values = to_json_value(redact_record(dict(result)))
    except JSONValueError as error:
        raise JSONValueError(f"{RESULT_NAME}: {error}") from None
    write_json_atomic(context.paths.result, values)
    return console.result_summary(values)


def _end_ray(ray_was_up: bool, context: RunContext) -> None:
    """Stop the Ray this run started and keep its logs; release the quiet console."""
    session_logs = None
    if not ray_was_up and _ray_initialized():
        session_logs = console.ray_logs_dir()
        sys.modules["ray"].shutdown()
    driver_lines = console.release_quiet_ray()
    if session_logs is not None:  # a caller's Ray session is theirs, logs included
        console.keep_ray_logs(context.paths.ray_logs, session_logs, driver_lines)


def _ray_initialized() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def load_for_run(target: str, options: RunOptions) -> tuple[Recipe, RunOptions]:
    """The checked options (bad ones refused before the recipe is imported) and the recipe
    `target` names; RecipeError (or the options' ValueError) for bad input."""
    options = options.checked()
    recipe = _load(target, options)
    return recipe, options


def recipe_budget(recipe: Recipe, options: RunOptions) -> BudgetChoice:
    """The budget the options ask of the recipe (BudgetError, before any folder or Ray)."""
    return resolve_budget(recipe.module, options.budget, options.overrides, smoke=options.smoke)


def _load(target: str, options: RunOptions) -> Recipe:
    if options.ray_address is None:
        from rl_harness.harness.rayinit import prefer_driver_environment

        prefer_driver_environment()  # before the recipe imports Ray
    try:
        return load_recipe(target)
    except RecipeError:
        raise
    except Exception as error:  # the recipe module itself failed to import
        raise RecipeError(f"importing {target} failed: {type(error).__name__}: {error}") from None


def execute_recipe(
    target: str, options: RunOptions, argv: list[str], *, process_exits: bool = False
) -> int:
    """Run the recipe `target` names once with full provenance; returns the process exit
    code. Bad input (target, options, B2 required but absent) raises before any folder is
    made: RecipeError, ValueError, FileExistsError (a run id taken).

    `process_exits`: the caller exits right after (the CLI command), so stop signals stay
    ignored instead of getting their old handlers back: a late SIGTERM cannot turn the exit
    code of a recorded run into a plain kill.
    """
    recipe, options = load_for_run(target, options)
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

    ray_was_up = _ray_initialized()  # a caller's Ray session is theirs to end
    console.quiet_ray(not options.verbose)
    previous = interrupts.install()
    status, error, code = FAILED, None, EXIT_FAILED
    summary: str | None = None
    started = time.monotonic()
    try:
        try:
            summary = _save_result(context, recipe.run(context))
            status, code = COMPLETED, EXIT_OK
        except RunInterrupted as interrupt:
            status, code = INTERRUPTED, interrupt.exit_code
            error = _interrupt_record(type(interrupt).__name__, interrupt.signal_name)
        except KeyboardInterrupt:  # raised by the recipe itself, or SIGINT outside our handler
            sigint = RunInterrupted(signal.SIGINT)
            status, code = INTERRUPTED, sigint.exit_code
            error = _interrupt_record("KeyboardInterrupt", sigint.signal_name)
        except SystemExit as exit_:  # a recipe calling sys.exit() did not complete
            error = {"type": "SystemExit", "message": f"sys.exit({exit_.code!r}) in the recipe"}
        except JSONValueError as failure:  # the result holds a value JSON cannot keep exactly
            error = {"type": "JSONValueError", "message": redact_env(str(failure))}
            log.error(f"[{context.run_id}] error: {error['message']}")
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
    took = console.duration_text(time.monotonic() - started)
    log.info(f"[{context.run_id}] {status} in {took}: {context.results_dir}")
    if summary is not None:  # the run ends with its headline numbers
        log.info(f"[{context.run_id}] result: {summary}")
    return code

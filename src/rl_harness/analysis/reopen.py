"""Reopen a finished run: the `RunContext` it ran with, its recipe and its checkpoints.

`reopen_run(results/<run-id>)` reads the run's manifest (the one record of how it ran),
imports its recipe, resolves the recorded budget by name with the recorded `--set`
overrides, and rebuilds the context on the run's own folders (no new run id, nothing
written). Analysis code then takes `reopened.context` exactly as the recipe's `run` took it.

It refuses (`ReopenError`, naming each difference) when the code here is not the code the
run ran: the recipe or another experiment source it imported differs, the library commit,
its uncommitted changes or an imported library module differ, or the budget the recipe now
resolves differs from the recorded settings. `allow_changes=True` reopens anyway and keeps
the differences in `reopened.differences`, so whatever is computed can say what it ran on.

Another machine is not another code: `reopened.machine` names, in one line, the recorded
facts that change float rounding (CPU, its kernel flags, OS build, torch/NumPy builds) where
this machine differs (harness/runtools/machine.py); `rl-harness analyze` prints it. What an
analysis recomputes there is expected to differ at float rounding from what the run wrote.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from rl_harness.analysis.checkpoints import RunCheckpoint, run_checkpoints
from rl_harness.harness.budgets import resolve_budget
from rl_harness.harness.context import RunContext, RunOptions
from rl_harness.harness.hardware import resolve_profile
from rl_harness.harness.recipe import LoadedRecipe, RecipeError, load_recipe
from rl_harness.harness.runtools.records import RunRecord, RunToolError
from rl_harness.harness.runtools.reproduce import check_code, locate_source

# check_code's warnings that mean the library code differs (the rest: lockfile, versions).
_LIBRARY_WARNINGS = ("library commit", "library uncommitted", "library modules differ")


class ReopenError(ValueError):
    """A run that cannot be reopened as it ran: one message naming each reason."""


@dataclass(frozen=True)
class ReopenedRun:
    context: RunContext  # as the recipe's run(context) got it, on the run's own folders
    recipe: ModuleType
    record: RunRecord
    checkpoints: tuple[RunCheckpoint, ...]  # every recorded one still here, oldest first
    differences: tuple[str, ...]  # code here vs the record (empty when it is the same)
    notes: tuple[str, ...]  # other drift that does not change the code (lockfile, versions)
    machine: str | None = None  # this machine vs the recorded one (machine_note), if differs

    @property
    def final_checkpoint(self) -> RunCheckpoint | None:
        return self.checkpoints[-1] if self.checkpoints else None


def _recipe(record: RunRecord) -> LoadedRecipe:
    """The recorded recipe, imported as the CLI imports a target: by its dotted name when it
    ran as one, else from its experiment.py (found in the checkout that holds the run)."""
    module_name = str(record.section("experiment").get("module") or "")
    try:
        target = str(locate_source(record)) if "." not in module_name else module_name
        recipe = load_recipe(target)
    except (RecipeError, RunToolError, ImportError) as error:
        raise ReopenError(
            f"{record.path}: cannot import its recipe {module_name}: {error}"
        ) from None
    return recipe


def reopen_run(results_dir: Path | str, *, allow_changes: bool = False) -> ReopenedRun:
    """The finished run in `results_dir` as it ran (see the module docstring)."""
    try:
        record = RunRecord.read(Path(results_dir))
    except RunToolError as error:
        raise ReopenError(str(error)) from None
    if record.manifest is None:
        raise ReopenError(f"{record.path}: no run_manifest.json (not a run folder)")
    options_record = record.section("options")
    loaded = _recipe(record)
    recipe = loaded.module
    differences: list[str] = []
    notes: list[str] = []
    try:
        check = check_code(record)
    except RunToolError as error:
        raise ReopenError(str(error)) from None
    differences += check.blockers
    for warning in check.warnings:
        (differences if warning.startswith(_LIBRARY_WARNINGS) else notes).append(warning)

    overrides = tuple(str(text) for text in options_record.get("set") or ())
    name = record.budget
    declared = loaded.declared
    if name is None and declared.budgets:
        differences.append(
            f"no budget recorded (a run from before budgets had names): the recipe's default "
            f"{declared.default!r} assumed"
        )
    try:
        # The recorded options, checked and normalised as the run's were (RunOptions.checked).
        asked = RunOptions(
            seed=int(record.seed if record.seed is not None else options_record.get("seed", 42)),
            smoke=bool(options_record.get("smoke")),
            budget=name,
            overrides=overrides,
            hardware_profile=str(options_record.get("hardware_profile") or "cpu-local"),
            torch_threads=options_record.get("torch_threads"),
            run_id=record.run_id,
            ray_address=options_record.get("ray_address"),
            log_to=tuple(options_record.get("log_to") or ()),
        ).checked()
        choice = resolve_budget(declared, asked.budget, asked.overrides, owner=loaded.module_name)
    except ValueError as error:  # BudgetError among them
        raise ReopenError(
            f"{record.path}: the recorded budget no longer resolves: {error}"
        ) from None
    recorded_settings = (record.manifest.get("budget") or {}).get("settings")
    # As the manifest wrote it (JSON: tuples read back as lists).
    now_settings = json.loads(json.dumps(choice.record()["settings"])) or {}
    if recorded_settings is not None and now_settings != recorded_settings:
        changed = sorted(
            key
            for key in set(recorded_settings) | set(now_settings)
            if now_settings.get(key) != recorded_settings.get(key)
        )
        differences.append(
            f"budget {choice.name!r} now resolves to other settings than recorded: "
            + ", ".join(changed)
        )
    if differences and not allow_changes:
        raise ReopenError(
            f"{record.path} ran on other code than is here (pass allow_changes=True to reopen "
            "it anyway):\n  " + "\n  ".join(differences)
        )

    options = asked.with_budget(choice)
    resume = options_record.get("resume_from")
    context = RunContext(
        experiment_module=recipe.__name__,
        experiment_dir=Path(os.path.dirname(recipe.__file__ or "")).resolve(),
        results_dir=record.results_dir,
        artifacts_dir=record.paths.artifacts_dir,
        run_id=record.run_id,
        seed=options.seed,
        smoke=options.smoke,
        budget=choice.name,
        settings=choice.settings,
        overrides=dict(choice.overrides),
        resume_from=resume,
        # The run's --torch-threads too: an analysis' float rounding depends on its threads.
        hardware=resolve_profile(options.hardware_profile, torch_threads=options.torch_threads),
        ray_address=options.ray_address,
        log_to=options.log_to,
        options=options,
    )
    return ReopenedRun(
        context=context,
        recipe=recipe,
        record=record,
        checkpoints=tuple(run_checkpoints(record.results_dir)),
        differences=tuple(differences),
        notes=tuple(notes),
        machine=check.machine,
    )

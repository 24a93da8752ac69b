"""A study's analysis stages, run on a finished run with their provenance (issue 48 item 2).

A training leaf declares its analysis as an ordered tuple of `AnalysisStage`s
(`ANALYSIS_STAGES`), each a plain function `stage(context) -> record` that writes its own
files into `context.results_dir`. The leaf's `run(context)` calls `run_stages(context,
ANALYSIS_STAGES)` after training; `rl-harness analyze LEAF [RUN...]` calls the same function
on runs reopened by `reopen_run`, so a finished run is analysed by exactly the code a new run
would be.

Each stage that runs gets an entry in the run's `analysis_provenance.json` (keyed by stage):
the library's and the experiment repo's git identity (commit, dirty, diff hash), the UTC
time it started, its seconds, the budget it ran with, and the sha256 of every input it read
(the files it names in `reads`, and each recorded checkpoint when `checkpoints`), hashed just
before it ran. A stage whose entry matches what it would record now (same code, same inputs,
same budget) is skipped: so is a whole rerun of an unchanged run, while a stage whose input
an earlier stage rewrote runs again. `force=True` runs every selected stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from rl_harness.analysis.checkpoints import run_checkpoints
from rl_harness.analysis.reopen import ReopenedRun, ReopenError, reopen_run
from rl_harness.harness.atomic import write_json_atomic
from rl_harness.harness.context import RunContext
from rl_harness.harness.gitinfo import git_identity
from rl_harness.harness.interrupts import COMPLETED
from rl_harness.harness.layout import ANALYSIS_PROVENANCE_NAME, MANIFEST_NAME, RESULTS_PARENT
from rl_harness.harness.provenance import library_root, sha256_file, utc_now
from rl_harness.harness.recipe import declared_recipe
from rl_harness.harness.runtools.records import RunRecord, RunToolError

PROVENANCE_SCHEMA_VERSION = 1
# The provenance fields that say what a stage ran on: equal ones make a stage current.
_IDENTITY_FIELDS = ("library", "experiment", "budget", "overrides", "inputs")


class StageError(ValueError):
    """A stage that cannot run on this run (an unknown name, an input that is missing)."""


@dataclass(frozen=True)
class AnalysisStage:
    """One named analysis of a finished run.

    `run(context)` computes it from the run's records and checkpoints, writes its files into
    `context.results_dir` and returns its record (a mapping). `reads` names the files of the
    run folder it reads (results-relative; hashed into its provenance, a missing one is an
    error); `checkpoints` says it reads the run's recorded checkpoints (each hashed, and the
    run refused when they are not on this disk); `writes` names what it writes.
    `on_request`: a check that costs more than the analysis a run needs (e.g. the same test
    with larger models) runs only when named (`only=`, `rl-harness analyze --stage`), never
    in-run nor in a call that names no stage."""

    name: str
    run: Callable[[RunContext], Mapping[str, Any]]
    reads: tuple[str, ...] = ()
    checkpoints: bool = True
    writes: tuple[str, ...] = ()
    on_request: bool = False


@dataclass(frozen=True)
class StageOutcome:
    name: str
    ran: bool  # False: skipped, its recorded provenance was current
    record: Mapping[str, Any] | None  # what run() returned (None when skipped)
    provenance: Mapping[str, Any]


def select_stages(stages: Sequence[AnalysisStage], only: str | None) -> tuple[AnalysisStage, ...]:
    """Every stage in order but those run on request, or only the one named (StageError
    naming the declared ones)."""
    if only is None:
        return tuple(stage for stage in stages if not stage.on_request)
    chosen = tuple(stage for stage in stages if stage.name == only)
    if not chosen:
        raise StageError(
            f"unknown stage {only!r}; this leaf declares: "
            + ", ".join(s.name + (" (on request)" if s.on_request else "") for s in stages)
        )
    return chosen


def hash_tree(path: Path) -> str:
    """sha256 of a file, or of a folder: every file's relative path and sha256, sorted."""
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_file(file)}\n".encode())
    return digest.hexdigest()


def stage_inputs(context: RunContext, stage: AnalysisStage) -> dict[str, str]:
    """{input: sha256} of what `stage` reads from this run, as it is now. Checkpoints are
    named `checkpoint/<iteration>` (a URI's is its text: nothing here to hash)."""
    inputs: dict[str, str] = {}
    for name in stage.reads:
        path = context.results_dir / name
        if not path.exists():
            raise StageError(f"{context.results_dir}: stage {stage.name!r} reads {name}: missing")
        inputs[name] = hash_tree(path)
    if stage.checkpoints:
        checkpoints = run_checkpoints(context.results_dir)
        if not checkpoints:
            # Checkpoints are found in the run's artifacts folder: none there is most often a
            # run whose artifacts were not brought to this disk.
            where = context.artifacts_dir
            missing = "" if where.is_dir() else f" (artifacts missing: no folder {where})"
            raise StageError(
                f"{context.results_dir}: no checkpoints{missing}; stage {stage.name!r} reads them"
            )
        for checkpoint in checkpoints:
            key = f"checkpoint/{checkpoint.iteration}"
            if not isinstance(checkpoint.path, Path):
                inputs[key] = f"uri:{checkpoint.path}"
                continue
            if not checkpoint.path.exists():
                raise StageError(
                    f"{context.results_dir}: checkpoint {checkpoint.path} is not on this disk "
                    f"(artifacts missing): stage {stage.name!r} reads it"
                )
            inputs[key] = hash_tree(checkpoint.path)
    return inputs


def _code(path: Path) -> dict[str, Any] | None:
    identity = git_identity(path)
    if identity is None:
        return None
    return {"commit": identity.commit, "dirty": identity.dirty, "diff_sha256": identity.diff_sha256}


def _settings(context: RunContext) -> Any:
    settings = context.settings
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        return dataclasses.asdict(settings)
    return settings


def read_provenance(results_dir: Path) -> dict[str, Any]:
    """analysis_provenance.json's stages ({stage: provenance}); {} when there is none."""
    path = Path(results_dir) / ANALYSIS_PROVENANCE_NAME
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")).get("stages") or {})


def _write_provenance(results_dir: Path, stages: Mapping[str, Any]) -> None:
    write_json_atomic(
        Path(results_dir) / ANALYSIS_PROVENANCE_NAME,
        {"schema_version": PROVENANCE_SCHEMA_VERSION, "stages": dict(stages)},
    )


def run_stages(
    context: RunContext,
    stages: Sequence[AnalysisStage],
    *,
    only: str | None = None,
    force: bool = False,
    differences: Sequence[str] = (),
    say: Callable[[str], None] = print,
) -> dict[str, StageOutcome]:
    """Run `stages` (or `only` the one named; never an `on_request` stage unless named) in
    order on the run of `context`, skipping each whose recorded provenance is current unless
    `force`; record each one run in the run's analysis_provenance.json. `differences` (from
    `reopen_run(allow_changes=True)`) are kept in the provenance of what runs. Returns
    {stage: StageOutcome}."""
    selected = select_stages(stages, only)
    code = {"library": _code(library_root()), "experiment": _code(context.experiment_dir)}
    run_label = context.run_id
    outcomes: dict[str, StageOutcome] = {}
    for stage in selected:
        recorded = read_provenance(context.results_dir)
        now = {
            **code,
            "budget": context.budget,
            "overrides": {key: str(value) for key, value in context.overrides.items()},
            "inputs": stage_inputs(context, stage),
        }
        previous = recorded.get(stage.name)
        if not force and previous is not None and _current(previous, now):
            say(f"[analyze {run_label}] stage {stage.name}: current, skipped")
            outcomes[stage.name] = StageOutcome(stage.name, False, None, previous)
            continue
        why = "forced" if force and previous is not None else _why(previous, now)
        say(f"[analyze {run_label}] stage {stage.name}: running ({why})")
        started, began = utc_now(), time.perf_counter()
        record = stage.run(context)
        seconds = round(time.perf_counter() - began, 3)
        provenance = {
            **now,
            "started_utc": started,
            "seconds": seconds,
            "settings": _settings(context),
            "writes": list(stage.writes),
            "differences": list(differences),
        }
        recorded = read_provenance(context.results_dir)  # a stage may not touch it; reread
        recorded[stage.name] = json.loads(json.dumps(provenance, default=str))
        _write_provenance(context.results_dir, recorded)
        say(f"[analyze {run_label}] stage {stage.name}: done in {seconds:.1f} s")
        outcomes[stage.name] = StageOutcome(stage.name, True, record, recorded[stage.name])
    return outcomes


def _current(previous: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    return all(previous.get(key) == now.get(key) for key in _IDENTITY_FIELDS)


def _why(previous: Mapping[str, Any] | None, now: Mapping[str, Any]) -> str:
    """What makes a stage stale, in words: never run, other code, other inputs."""
    if previous is None:
        return "no provenance recorded"
    changed = [key for key in _IDENTITY_FIELDS if previous.get(key) != now.get(key)]
    inputs_before, inputs_now = previous.get("inputs") or {}, now.get("inputs") or {}
    named = sorted(
        name
        for name in set(inputs_before) | set(inputs_now)
        if inputs_before.get(name) != inputs_now.get(name)
    )
    parts = [key for key in changed if key != "inputs"]
    if named:
        parts.append("inputs changed: " + ", ".join(named))
    return "stale: " + "; ".join(parts)


# ---------------------------------------------------------------------------- a leaf's runs


def leaf_stages(recipe: ModuleType) -> tuple[AnalysisStage, ...]:
    """The analysis stages the leaf's `RECIPE` declares (`Recipe(stages=...)`; StageError
    when it declares none, naming a module `ANALYSIS_STAGES` left out of its RECIPE)."""
    stages = declared_recipe(recipe).stages
    if not stages:
        hint = (
            ": pass its ANALYSIS_STAGES as Recipe(..., stages=ANALYSIS_STAGES)"
            if hasattr(recipe, "ANALYSIS_STAGES")
            else ""
        )
        raise StageError(f"{recipe.__name__} declares no analysis stages in RECIPE{hint}")
    checked = tuple(stage for stage in stages if isinstance(stage, AnalysisStage))
    if len(checked) != len(stages):
        raise StageError(f"{recipe.__name__}: RECIPE's stages are not all AnalysisStage")
    return checked


def leaf_runs(recipe: ModuleType, runs: Sequence[str]) -> list[Path]:
    """The run folders to analyse: each of `runs` (a folder, or a run id under the leaf's
    results/), else every completed run under the leaf's results/."""
    results = Path(recipe.__file__ or "").resolve().parent / RESULTS_PARENT
    if not runs:
        found = sorted(path.parent for path in results.glob(f"*/{MANIFEST_NAME}"))
        completed = [path for path in found if _status(path) == COMPLETED]
        if not completed:
            raise StageError(f"no completed run under {results}")
        return completed
    folders = []
    for text in runs:
        path = Path(text) if Path(text).is_dir() else results / text
        if not (path / MANIFEST_NAME).is_file():
            raise StageError(f"{text}: not a run folder nor a run id under {results}")
        folders.append(path.resolve())
    return folders


def _status(folder: Path) -> str | None:
    try:
        return RunRecord.read(folder).status
    except RunToolError:
        return None


def reopen_for(recipe: ModuleType, folder: Path, *, allow_changes: bool) -> ReopenedRun:
    """The run reopened (`reopen_run`), refused when another leaf made it (StageError) or
    it ran on other code (ReopenError's reasons on one line)."""
    try:
        reopened = reopen_run(folder, allow_changes=allow_changes)
    except ReopenError as error:
        raise StageError("; ".join(line.strip() for line in str(error).splitlines())) from None
    ran, leaf = (Path(m.__file__ or "").resolve() for m in (reopened.recipe, recipe))
    if ran != leaf:
        raise StageError(f"{folder}: a run of {ran}, not of {leaf}")
    return reopened


def check_checkpoints(reopened: ReopenedRun, stages: Sequence[AnalysisStage]) -> None:
    """StageError before any work when a stage reads checkpoints this run no longer has
    here (its artifacts folder deleted or never downloaded)."""
    readers = [stage.name for stage in stages if stage.checkpoints]
    if not readers:
        return
    where = reopened.record.results_dir
    if not reopened.checkpoints:
        # Checkpoints are listed from the run's artifacts folder: none found is most often a
        # run whose artifacts are not on this disk (deleted, moved, never downloaded).
        artifacts = reopened.context.artifacts_dir
        why = "" if artifacts.is_dir() else f" (artifacts missing: no folder {artifacts})"
        raise StageError(f"{where}: no checkpoints found{why}; stage {readers[0]!r} reads them")
    missing = [
        c.path for c in reopened.checkpoints if isinstance(c.path, Path) and not c.path.exists()
    ]
    if missing:
        raise StageError(
            f"{where}: {len(missing)} checkpoint(s) not on this disk (artifacts missing: "
            f"{missing[0]}); stage {readers[0]!r} reads them"
        )

"""Continuations: a run started with `--resume-from` a checkpoint of another run links that
run (its parent) in its manifest, so readers can follow the chain.

The manifest's `parent` (None for a fresh run, or when the checkpoint is not in a run folder
this machine can read, e.g. a URI):

    {"run_id": "...", "results_dir": "/abs/.../results/<parent-id>",
     "checkpoint": "checkpoints/iter_000004",  # relative to the parent's artifacts folder
     "iteration": 4, "env_steps": 512}          # the parent's record of that checkpoint

The parent is found from the checkpoint's path: an ancestor folder named like a run id,
whose results folder (beside this run's, or the conventional `../results/<id>` of that
artifacts folder) holds a manifest of that run id whose artifacts folder is that ancestor.
Readers follow a chain one link at a time (`rl_harness.analysis.run_checkpoints`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rl_harness.harness.atomic import RecordReadError
from rl_harness.harness.layout import (
    RESULTS_PARENT,
    RunPaths,
    is_checkpoint,
    resolve_checkpoint,
)
from rl_harness.harness.locations import Location, is_uri
from rl_harness.harness.manifest import load_manifest
from rl_harness.harness.metrics import read_metrics


def _run_of(folder: Path, results_base: Path) -> tuple[Path, dict[str, Any]] | None:
    """(results folder, manifest) of the run whose artifacts folder is `folder`, or None."""
    for candidate in (
        results_base / folder.name,
        folder.parent.parent / RESULTS_PARENT / folder.name,
    ):
        try:
            manifest = load_manifest(candidate)
        except RecordReadError:
            continue
        if manifest is None or manifest.get("run_id") != folder.name:
            continue
        local = (manifest.get("artifacts") or {}).get("local")
        if local and Path(local).resolve() == folder.resolve():
            return candidate, manifest
    return None


def parent_record(resume_from: Location | None, results_base: Path) -> dict[str, Any] | None:
    """The `parent` manifest field of a run resuming from `resume_from` whose own results
    folder sits in `results_base` (see the module docstring); None when there is none."""
    if resume_from is None or is_uri(str(resume_from)):
        return None
    path = Path(resume_from).resolve()
    try:
        checkpoint = path if is_checkpoint(path) else resolve_checkpoint(path)
    except FileNotFoundError:
        checkpoint = path  # a Tune experiment folder: the run is still its ancestor
    for folder in (checkpoint, *checkpoint.parents):
        found = _run_of(folder, Path(results_base))
        if found is None:
            continue
        results_dir, _ = found
        paths = RunPaths(results_dir, folder)
        record: dict[str, Any] = {
            "run_id": folder.name,
            "results_dir": str(results_dir),
            "checkpoint": paths.record(checkpoint),
            "iteration": None,
            "env_steps": None,
        }
        if paths.checkpoint_log.is_file():
            for row in read_metrics(paths.checkpoint_log):
                if paths.resolve(str(row.get("path") or "")) == checkpoint:
                    record["iteration"] = row.get("iteration")
                    record["env_steps"] = row.get("env_steps")
        return record
    return None

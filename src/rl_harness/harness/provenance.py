"""The provenance manifest: what ran, from which commits, on which machine, and how it ended."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib.metadata
import os
import platform
import sys
from pathlib import Path
from typing import Any

from rl_harness.harness.atomic import write_text_atomic
from rl_harness.harness.context import RunContext
from rl_harness.harness.continuation import parent_record
from rl_harness.harness.gitinfo import GitIdentity, find_git_root, git_identity
from rl_harness.harness.hardware import host_facts, numerics_facts, thread_settings
from rl_harness.harness.interrupts import FINAL_STATUSES, RUNNING
from rl_harness.harness.layout import EXPERIMENT_PATCH_NAME, LIBRARY_PATCH_NAME
from rl_harness.harness.liveness import process_identity

KEY_PACKAGES = ("ray", "torch", "gymnasium", "numpy")
LIBRARY_DIST = "rl-harness"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def sha256_file(path: Path) -> str:
    """The file's sha256 (hex): source hashes here, artifact hashes in storage/."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def find_lockfile(start: Path, stop_at: Path | None = None) -> Path | None:
    """The nearest uv.lock at or above `start` (not above `stop_at` when given)."""
    folder = Path(start).resolve()
    stop = Path(stop_at).resolve() if stop_at else None
    while True:
        candidate = folder / "uv.lock"
        if candidate.is_file():
            return candidate
        if folder == stop or folder.parent == folder:
            return None
        folder = folder.parent


def package_versions() -> dict[str, str | None]:
    return dict(_package_versions())


@functools.cache  # installed versions do not change under a running process; a lookup scans
def _package_versions() -> dict[str, str | None]:  # site-packages (seconds on a busy disk)
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in KEY_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@functools.cache
def _real_path(file: str) -> str:
    return os.path.realpath(file)


def imported_sources(root: Path, *, exclude: Path | None = None) -> dict[str, str]:
    """sha256 of every imported module's .py file under `root` (not under `exclude`, nor in
    a virtual environment or site-packages there), keyed by its path relative to `root`.

    Plain string prefixes over cached real paths: with torch and Ray imported there are
    thousands of modules, and pathlib's resolve/is_relative_to took ~1.5 s per call here."""
    inside = os.path.join(os.path.realpath(root), "")  # "/a/b/" (and "/" for the root)
    outside = os.path.join(os.path.realpath(exclude), "") if exclude is not None else None
    sources: dict[str, str] = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.endswith(".py"):
            continue
        path = _real_path(file)
        if not path.startswith(inside) or (outside is not None and path.startswith(outside)):
            continue
        parts = path[len(inside) :].split(os.sep)
        if "site-packages" in parts or any(part.startswith(".") for part in parts):
            continue
        if os.path.isfile(path):
            sources["/".join(parts)] = sha256_file(Path(path))
    return dict(sorted(sources.items()))


def record_sources(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with the sha256 of every experiment and library source imported so far
    (added to what was recorded before: modules a recipe imports while running count too)."""
    experiment, library = manifest["experiment"], manifest["library"]
    root = Path(manifest["experiment_repo"]["root"] or experiment["dir"])
    lib = library_root()
    return {
        **manifest,
        "experiment": {
            **experiment,
            "sources_root": str(root),
            "sources": {**imported_sources(root, exclude=lib), **experiment.get("sources", {})},
        },
        "library": {
            **library,
            "sources": {**imported_sources(lib), **library.get("sources", {})},
        },
    }


def library_root() -> Path:
    import rl_harness

    return Path(rl_harness.__file__).resolve().parent


def _save_patch(identity: GitIdentity | None, results_dir: Path, name: str) -> str | None:
    """Save a dirty tree's patch against HEAD beside the manifest; return its file name."""
    if identity is None or identity.diff_sha256 is None:
        return None
    write_text_atomic(results_dir / name, identity.patch)
    return name


def _identity_record(identity: GitIdentity | None, patch_file: str | None) -> dict[str, Any]:
    if identity is None:
        return {"root": None, "commit": None, "branch": None, "dirty": None, "diff_sha256": None}
    record = identity.to_dict()
    record["patch_file"] = patch_file
    return record


def start_manifest(
    context: RunContext,
    *,
    source_file: Path,
    argv: list[str],
    options: dict[str, Any],
) -> dict[str, Any]:
    """Build the manifest of a run that is about to start (status `running`)."""
    experiment_git = git_identity(context.experiment_dir)
    repo_root = Path(experiment_git.root) if experiment_git else None
    # The bundled example lives in the library's checkout: read that repo once, not twice.
    same_repo = repo_root is not None and find_git_root(library_root()) == repo_root
    library_git = experiment_git if same_repo else git_identity(library_root())
    lockfile = find_lockfile(context.experiment_dir, stop_at=None)
    try:
        library_version = importlib.metadata.version(LIBRARY_DIST)
    except importlib.metadata.PackageNotFoundError:
        library_version = None
    relative_dir = (
        context.experiment_dir.relative_to(repo_root).as_posix()
        if repo_root and context.experiment_dir.is_relative_to(repo_root)
        else context.experiment_dir.name
    )
    experiment_patch = _save_patch(experiment_git, context.results_dir, EXPERIMENT_PATCH_NAME)
    library_patch = (
        experiment_patch
        if same_repo
        else _save_patch(library_git, context.results_dir, LIBRARY_PATCH_NAME)
    )
    manifest = {
        "schema_version": 1,
        "run_id": context.run_id,
        "status": RUNNING,
        "experiment": {
            "module": context.experiment_module,
            "source_file": str(source_file),
            "source_sha256": sha256_file(source_file),
            "dir": str(context.experiment_dir),
            "relative_dir": relative_dir,
        },
        "command": {"argv": list(argv), "executable": sys.executable, "cwd": str(Path.cwd())},
        "options": options,
        # A --resume-from run's parent (continuation.py): readers follow the chain.
        "parent": parent_record(context.resume_from, context.results_dir.parent),
        "seed": context.seed,
        # The recipe's budget: its name, every setting (overrides applied), the overrides.
        "budget": context.budget_record,
        "experiment_repo": _identity_record(experiment_git, experiment_patch),
        "library": {
            "version": library_version,
            "path": str(library_root()),
            "same_repo_as_experiment": same_repo,
            **_identity_record(library_git, library_patch),
        },
        "lockfile": {
            "path": str(lockfile) if lockfile else None,
            "sha256": sha256_file(lockfile) if lockfile else None,
        },
        "versions": package_versions(),
        "hardware": {**host_facts(), "plan": context.hardware.to_dict()},
        # Who writes the final record: readers report `crashed` once it is gone (liveness.py).
        "process": process_identity(),
        "started_at": utc_now(),
        "ended_at": None,
        "duration_s": None,
        "error": None,
        "artifacts": {"local": str(context.artifacts_dir), "remote": None},
    }
    return record_sources(manifest)


def finish_manifest(
    manifest: dict[str, Any],
    status: str,
    *,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of an ended run: `completed`, `failed` (with error) or `interrupted`."""
    if status not in FINAL_STATUSES:
        raise ValueError(f"not a final status: {status!r}")
    ended = dt.datetime.now(dt.UTC)
    started = dt.datetime.fromisoformat(manifest["started_at"])
    return {
        **record_sources(manifest),
        # Recipes may set torch's threads after the start record, and import torch and NumPy
        # after it (their kernels and builds): the end holds the last word.
        "hardware": {
            **manifest.get("hardware", {}),
            "threads": thread_settings(),
            "numerics": numerics_facts(),
        },
        "status": status,
        "error": error,
        "ended_at": ended.isoformat(timespec="milliseconds"),
        "duration_s": round((ended - started).total_seconds(), 3),
    }

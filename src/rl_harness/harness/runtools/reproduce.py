"""Re-run a recorded run with its seed and options, then compare the metrics.

The rule for code that differs from the record:

- refuse (unless --force) when the experiment source file's sha256 differs, or any other
  experiment-repo source the run imported (a study's shared.py), naming the files, or when
  the experiment repo has uncommitted code changes whose patch hash differs from the recorded
  one;
- warn when a library module the run imported differs, when the experiment repo commit, the
  library commit or its uncommitted changes, the
  library version, the lockfile hash or a key package version differ, or when the recorded
  run had uncommitted changes and the tree is clean now;
- note (`CodeCheck.machine`, one line) when this machine differs from the recorded one in a
  fact that changes float rounding (runtools/machine.py): not a code difference.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rl_harness.harness.context import new_run_id
from rl_harness.harness.gitinfo import find_git_root, git_identity
from rl_harness.harness.locations import is_uri
from rl_harness.harness.provenance import (
    LIBRARY_DIST,
    find_lockfile,
    library_root,
    package_versions,
    sha256_file,
)
from rl_harness.harness.runtools.machine import (
    machine_differences,
    machine_facts,
    machine_note,
    this_machine,
)
from rl_harness.harness.runtools.records import RunRecord, RunToolError
from rl_harness.harness.runtools.show import short


@dataclass
class CodeCheck:
    source_file: Path
    warnings: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    machine: str | None = None  # the recorded machine vs this one (machine_note), if differs


def locate_source(record: RunRecord) -> Path:
    """The recorded experiment.py, found in the checkout that holds the run folder first.

    Results are tracked in git, so a run folder in a fresh clone (another machine, another
    path) points at the same leaf relative to its repo root.
    """
    experiment = record.section("experiment")
    recorded = Path(str(experiment.get("source_file") or ""))
    recorded_root = record.section("experiment_repo").get("root")
    here = find_git_root(record.path)
    if here is not None and recorded_root and recorded.is_relative_to(recorded_root):
        candidate = here / recorded.relative_to(recorded_root)
        if candidate.is_file():
            return candidate
    if recorded.is_file():
        return recorded
    raise RunToolError(f"the recorded experiment source {recorded} does not exist here")


def _differs(what: str, recorded: Any, now: Any) -> str:
    def label(value: Any) -> str:
        return "none" if value is None else short(value, 12)

    return f"{what} differs: recorded {label(recorded)}, now {label(now)}"


def changed_sources(recorded: dict[str, str], root: Path) -> list[str]:
    """Recorded files (relative to `root`) that are missing or whose sha256 differs now."""
    return [
        name
        for name, digest in sorted(recorded.items())
        if not (root / name).is_file() or sha256_file(root / name) != digest
    ]


def _sources_root(record: RunRecord, source: Path) -> Path:
    """Where the recorded experiment sources live here: the checkout holding the leaf."""
    recorded_root = record.section("experiment").get("sources_root")
    here = find_git_root(source)
    return here if here is not None else Path(str(recorded_root or source.parent))


def check_code(record: RunRecord) -> CodeCheck:
    source = locate_source(record)
    check = CodeCheck(source)
    experiment = record.section("experiment")
    changed = changed_sources(experiment.get("sources") or {}, _sources_root(record, source))
    if changed:
        check.blockers.append(f"experiment sources differ from the record: {', '.join(changed)}")
    library_changed = changed_sources(
        record.section("library").get("sources") or {}, library_root()
    )
    if library_changed:
        check.warnings.append(f"library modules differ: {', '.join(library_changed)}")
    if sha256_file(source) != experiment.get("source_sha256"):
        check.blockers.append(
            _differs(
                f"experiment source {source.name}",
                experiment.get("source_sha256"),
                sha256_file(source),
            )
        )
    recorded_repo = record.section("experiment_repo")
    repo = git_identity(source.parent)
    now_commit = repo.commit if repo else None
    now_patch = repo.diff_sha256 if repo else None
    if now_commit != recorded_repo.get("commit"):
        check.warnings.append(
            _differs("experiment repo commit", recorded_repo.get("commit"), now_commit)
        )
    if now_patch is not None and now_patch != recorded_repo.get("diff_sha256"):
        check.blockers.append(
            _differs(
                "uncommitted changes in the experiment repo (patch sha256)",
                recorded_repo.get("diff_sha256"),
                now_patch,
            )
        )
    elif now_patch is None and recorded_repo.get("diff_sha256"):
        check.warnings.append(
            "the recorded run had uncommitted changes "
            f"({recorded_repo.get('patch_file')}); the experiment repo is clean now"
        )

    recorded_library = record.section("library")
    library = git_identity(library_root())
    for key, what in (("commit", "library commit"), ("diff_sha256", "library uncommitted changes")):
        now = getattr(library, key) if library else None
        if now != recorded_library.get(key):
            check.warnings.append(_differs(what, recorded_library.get(key), now))
    try:
        version = importlib.metadata.version(LIBRARY_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != recorded_library.get("version"):
        check.warnings.append(_differs("library version", recorded_library.get("version"), version))

    lockfile = find_lockfile(source.parent)
    now_lock = sha256_file(lockfile) if lockfile else None
    if now_lock != record.section("lockfile").get("sha256"):
        check.warnings.append(
            _differs("lockfile sha256", record.section("lockfile").get("sha256"), now_lock)
        )
    recorded_versions = record.section("versions")
    for name, now in package_versions().items():
        if name in recorded_versions and recorded_versions[name] != now:
            check.warnings.append(f"{name} differs: recorded {recorded_versions[name]}, now {now}")
    recorded_machine = machine_facts(record.manifest or {})
    check.machine = machine_note(
        machine_differences(recorded_machine, this_machine()), "recorded", "here"
    )
    return check


@dataclass(frozen=True)
class Reproduction:
    command: list[str]
    cwd: Path
    results_dir: Path  # results/<new-run-id>/


def plan_reproduction(
    record: RunRecord,
    source: Path,
    *,
    results_parent: Path | None = None,
    artifacts_parent: Path | None = None,
) -> Reproduction:
    """The CLI call that re-runs `record`: same source, seed, budget (smoke flag, `--budget`,
    `--set`), hardware profile and resume point, a fresh run id, results beside the recorded
    run unless told otherwise."""
    options = record.section("options")
    seed = (record.manifest or {}).get("seed", options.get("seed"))
    profile = options.get("hardware_profile") or "cpu-local"
    if not isinstance(seed, int):
        raise RunToolError(f"{record.path} records no integer seed")
    run_id = new_run_id()
    parent = Path(results_parent).resolve() if results_parent else record.path.parent
    command = [sys.executable, "-m", "rl_harness.cli", str(source)]
    command += ["--seed", str(seed), "--hardware-profile", str(profile)]
    command += ["--run-id", run_id, "--results-dir", str(parent)]
    if options.get("smoke"):
        command.append("--smoke")
    elif options.get("budget"):  # recorded since budgets are chosen by name
        command += ["--budget", str(options["budget"])]
    for text in options.get("set") or []:
        command += ["--set", str(text)]
    if artifacts_parent:
        command += ["--artifacts-dir", str(Path(artifacts_parent).resolve())]
    resume = options.get("resume_from")
    if resume:
        if not is_uri(str(resume)) and not Path(resume).exists():
            raise RunToolError(f"the recorded run resumed from {resume}, which does not exist here")
        command += ["--resume-from", str(resume)]
    cwd = find_git_root(source) or source.parent
    return Reproduction(command, cwd, parent / run_id)


def run_reproduction(plan: Reproduction) -> int:
    """Run the planned command, streaming its output; returns its exit code."""
    sys.stdout.flush()
    return subprocess.run(plan.command, cwd=plan.cwd, check=False).returncode

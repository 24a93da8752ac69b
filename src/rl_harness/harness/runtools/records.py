"""Reading a run's records (results/<run-id>/) and finding runs under a folder.

`RunRecord` is the one reader of a run folder, composed from its `RunPaths` (layout.py): the
run tools use it, and `rl_harness.analysis.RunArtifacts` extends it with checkpoints and
Tune trials. The artifacts folder is found once: the manifest's `artifacts.local`, else (a
record from before checkpoint paths were relative) the folder of the summary's final
checkpoint, else `<leaf>/artifacts/<run-id>` beside `<leaf>/results/<run-id>`; the first
that exists wins, so a run copied to another machine still resolves.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Self

from rl_harness.harness.atomic import RecordReadError, read_record
from rl_harness.harness.layout import (
    CONFIG_NAME,
    MANIFEST_NAME,
    METRICS_NAME,
    RESULT_NAME,
    RESULTS_PARENT,
    SUMMARY_NAME,
    RunPaths,
    conventional_artifacts_dir,
)
from rl_harness.harness.liveness import StatusCheck, check_status
from rl_harness.harness.manifest import load_manifest
from rl_harness.harness.metric_keys import RETURN_KEY
from rl_harness.harness.metrics import scan_metrics

HEADLINE_METRIC = RETURN_KEY
# Folders never searched for runs: environments, VCS data, large ignored outputs.
_SKIPPED_DIRS = {"artifacts", "node_modules", "__pycache__", "site-packages"}


class RunToolError(ValueError):
    """Bad input to a run tool (no such run, not a run folder, unreadable record): the CLI
    prints it as one line, exit code 2."""


def _read_json(path: Path) -> Any:
    try:
        return read_record(path)
    except RecordReadError as error:
        raise RunToolError(str(error)) from None


def _read_optional(path: Path) -> Any | None:
    return _read_json(path) if path.is_file() else None


def _locate_artifacts(
    results_dir: Path, manifest: dict[str, Any] | None, problems: list[str] | None = None
) -> Path:
    """The run's artifacts folder (see the module docstring); the layout's place if none
    exists. `problems`: where a lenient reader notes an unreadable summary (else it raises)."""
    candidates: list[Path] = []
    local = ((manifest or {}).get("artifacts") or {}).get("local")
    if local:
        candidates.append(Path(local))
    conventional = conventional_artifacts_dir(results_dir)
    if not any(path.is_dir() for path in [*candidates, conventional]):
        try:
            summary = _read_optional(RunPaths(results_dir, conventional).summary)
        except RunToolError as error:
            if problems is None:
                raise
            _note(problems, f"{error}; read without it")
            summary = None
        final = (summary or {}).get("final_checkpoint") if isinstance(summary, dict) else None
        if final and Path(final).is_absolute():  # <artifacts>/checkpoints/iter_N
            candidates.append(Path(final).parent.parent)
    candidates.append(conventional)
    found = next((path for path in candidates if path.is_dir()), conventional)
    return found.resolve()


def _note(problems: list[str], text: str) -> None:
    if text not in problems:  # a record read twice is named once
        problems.append(text)


@dataclass(frozen=True)
class RunRecord:
    """One results/<run-id>/ folder: its manifest plus, lazily, metrics, summary, config and
    result, each read once (`metrics()` reads metrics.jsonl again, for a live run).

    Strict (the default: a library reader): a corrupt record raises `RunToolError`, and
    metrics.jsonl lines that are not rows are skipped. Lenient (`read(..., lenient=True)`,
    the CLI's readers): a corrupt manifest, summary, config or result reads as absent, and
    each file that could not be read, or metrics rows skipped, gets one line in `problems`
    naming the file and what was skipped; the caller prints them and goes on."""

    paths: RunPaths
    manifest: dict[str, Any] | None  # None for a folder with a summary alone (or, lenient,
    # a manifest that could not be read)
    lenient: bool = False
    problems: list[str] = field(default_factory=list, compare=False, repr=False)
    manifest_error: str | None = None  # lenient: why the manifest could not be read

    @classmethod
    def read(cls, results_dir: Path, *, lenient: bool = False) -> Self:
        """The run in `results_dir`, whatever records it holds (none is an empty reader)."""
        results_dir = Path(results_dir).expanduser().resolve()
        problems: list[str] = []
        manifest_error = None
        try:
            manifest = load_manifest(results_dir)
        except RecordReadError as error:
            if not lenient:
                raise RunToolError(str(error)) from None
            manifest, manifest_error = None, str(error)
            _note(problems, f"{error}; read without it")
        artifacts = _locate_artifacts(results_dir, manifest, problems if lenient else None)
        return cls(RunPaths(results_dir, artifacts), manifest, lenient, problems, manifest_error)

    def _optional(self, path: Path) -> Any | None:
        """A JSON record of the run; a lenient reader notes one it cannot read as absent."""
        try:
            return _read_optional(path)
        except RunToolError as error:
            if not self.lenient:
                raise
            _note(self.problems, f"{error}; read without it")
            return None

    @property
    def results_dir(self) -> Path:
        return self.paths.results_dir

    @property
    def path(self) -> Path:
        """The results/<run-id>/ folder (the run tools' name for it)."""
        return self.paths.results_dir

    @property
    def artifacts_dir(self) -> Path | None:
        """artifacts/<run-id>/ where it is now; None when it is not on this machine."""
        return self.paths.artifacts_dir if self.paths.artifacts_dir.is_dir() else None

    @property
    def run_id(self) -> str:
        for record in (self.manifest, self.summary):
            if record and record.get("run_id"):
                return str(record["run_id"])
        return self.results_dir.name

    @property
    def seed(self) -> int | None:
        for record in (self.manifest, self.summary):
            if record and record.get("seed") is not None:
                return int(record["seed"])
        return None

    @property
    def budget(self) -> str | None:
        """The recipe budget the run used: the manifest's `options.budget`, "smoke" for a
        smoke run; None for a run recorded before budgets had names (or a recipe with none)."""
        options = self.section("options")
        if options.get("smoke"):
            return "smoke"
        budget = options.get("budget")
        return str(budget) if budget is not None else None

    @cached_property
    def status_check(self) -> StatusCheck | None:
        """The status readers report (`crashed` for a running record whose process is gone);
        None without a manifest."""
        return check_status(self.manifest) if self.manifest is not None else None

    @property
    def status(self) -> str | None:
        """The manifest's status (running / completed / failed / interrupted), or `crashed`
        for a `running` record whose process is gone (liveness.py; the record is left as it
        is). A running record from another host stays `running` (`status_note` says why)."""
        check = self.status_check
        return check.status if check else None

    @property
    def recorded_status(self) -> str | None:
        """The status written in the manifest."""
        return self.manifest.get("status") if self.manifest else None

    @property
    def status_note(self) -> str | None:
        """Why the status is `crashed`, or why a `running` one could not be checked."""
        check = self.status_check
        return check.note if check else None

    def section(self, name: str) -> dict[str, Any]:
        value = (self.manifest or {}).get(name)
        return value if isinstance(value, dict) else {}

    def metrics(self) -> list[dict[str, Any]]:
        """Rows of metrics.jsonl, read now (empty if the run logged none); lines that are not
        rows (a torn last line) are skipped, and a lenient reader notes which."""
        if not self.paths.metrics.is_file():
            return []
        try:
            scan = scan_metrics(self.paths.metrics)
        except OSError as error:
            problem = f"{self.paths.metrics} cannot be read ({error.strerror or error})"
            if not self.lenient:
                raise RunToolError(problem) from None
            _note(self.problems, f"{problem}; read without it")
            return []
        scan_problem = scan.problem(self.paths.metrics)
        if scan_problem is not None and self.lenient:
            _note(self.problems, scan_problem)
        return scan.rows

    @cached_property
    def metrics_rows(self) -> list[dict[str, Any]]:
        return self.metrics()

    @property
    def has_metrics(self) -> bool:
        return self.paths.metrics.is_file()

    @cached_property
    def summary(self) -> dict[str, Any] | None:
        value = self._optional(self.paths.summary)
        if value is None or isinstance(value, dict) or not self.lenient:
            return value
        _note(self.problems, f"{self.paths.summary} is not a JSON object; read without it")
        return None

    @cached_property
    def config(self) -> dict[str, Any] | None:
        """config.json: the resolved AlgorithmConfig the run trained with (None if absent)."""
        value = self._optional(self.paths.config)
        return value if isinstance(value, dict) else None

    @cached_property
    def result(self) -> Any | None:
        return self._optional(self.paths.result)

    @property
    def final_metrics(self) -> dict[str, Any]:
        """The last metrics.jsonl row, else the direct runner's summary `final_metrics`."""
        if self.metrics_rows:
            return self.metrics_rows[-1]
        final = (self.summary or {}).get("final_metrics")
        return final if isinstance(final, dict) else {}

    @property
    def headline(self) -> float | None:
        """The last logged `env_runners/episode_return_mean`, the one number a table shows."""
        for row in reversed(self.metrics_rows):
            value = row.get(HEADLINE_METRIC)
            if isinstance(value, int | float):
                return float(value)
        return None

    def patch_text(self, repo_section: str) -> str | None:
        name: str | None = self.section(repo_section).get("patch_file")
        if not name or not (self.results_dir / name).is_file():
            return None
        return (self.results_dir / name).read_text(encoding="utf-8", errors="replace")

    def optional_json(self, name: str) -> Any | None:
        """Another JSON record of the run, None when it has none (a lenient reader also
        notes one it cannot read, and reads it as absent)."""
        return self._optional(self.results_dir / name)

    def read_json(self, name: str) -> Any:
        """Another JSON record of the run, e.g. a recipe's probe_metrics.json."""
        path = self.results_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"run {self.run_id} has no {name} in {self.results_dir}")
        return _read_json(path)


def load_run(path: Path, *, lenient: bool = False) -> RunRecord:
    """The run in `path` (a results/<run-id>/ folder or its run_manifest.json); `lenient`:
    see `RunRecord` (a manifest that exists but cannot be read is then noted, not raised)."""
    path = Path(path).expanduser()
    if path.name == MANIFEST_NAME and path.is_file():
        path = path.parent
    if not (path / MANIFEST_NAME).is_file():
        raise RunToolError(f"{path} is not a run folder (no {MANIFEST_NAME})")
    return RunRecord.read(path, lenient=lenient)


@dataclass(frozen=True)
class Unreadable:
    """A run folder a reader could not read, and why (the readers name each one)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"cannot read run folder {self.path}: {self.reason}"


@dataclass(frozen=True)
class RunScan:
    """The runs found under a folder, oldest first, and the run folders that could not be
    read (a corrupt manifest, or a results/<run-id>/ without one)."""

    records: list[RunRecord]
    unreadable: list[Unreadable]


# A folder under results/ holding one of these (or nothing) but no manifest is a run whose
# manifest is missing (deleted, or a context made without a run), not some other folder.
_RECORD_NAMES = {CONFIG_NAME, METRICS_NAME, SUMMARY_NAME, RESULT_NAME}


def _lost_manifest(folder: Path, files: list[str], dirs: list[str]) -> bool:
    return folder.parent.name == RESULTS_PARENT and (
        (not files and not dirs) or bool(_RECORD_NAMES & set(files))
    )


def _walk_runs(root: Path) -> tuple[list[Path], list[Path]]:
    """(folders holding a run_manifest.json, results/<id>/ folders missing one) under root."""
    found, lost = [], []
    for folder, dirs, files in os.walk(Path(root)):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        if MANIFEST_NAME in files:
            found.append(Path(folder))
            dirs[:] = []  # a run folder holds no further runs
        elif _lost_manifest(Path(folder), files, dirs):
            lost.append(Path(folder))
            dirs[:] = []
    return found, lost


def find_run_dirs(root: Path) -> list[Path]:
    """Every folder at or under `root` holding a run_manifest.json (hidden folders skipped)."""
    return _walk_runs(root)[0]


def find_runs(root: Path, *, lenient: bool = False) -> RunScan:
    """The runs under `root`, oldest first, and every run folder that could not be read:
    a corrupt manifest, or a results/<run-id>/ holding records (or nothing) but no
    manifest. Callers name the unreadable ones; none is skipped silently. `lenient`: the
    records are lenient readers (`RunRecord`; a folder whose manifest cannot be read is
    still unreadable here: nothing says what ran)."""
    found, lost = _walk_runs(root)
    records, unreadable = [], []
    for folder in found:
        try:
            record = load_run(folder, lenient=lenient)
            if record.manifest_error is not None:  # lenient: nothing says what ran
                raise RunToolError(record.manifest_error)
        except RunToolError as error:
            unreadable.append(Unreadable(folder, _reason(error, folder)))
            continue
        records.append(record)
    for folder in lost:
        what = "it is empty" if not any(folder.iterdir()) else "it holds records"
        unreadable.append(Unreadable(folder, f"no {MANIFEST_NAME} ({what})"))
    records.sort(key=lambda r: (str((r.manifest or {}).get("started_at") or ""), r.run_id))
    return RunScan(records, sorted(unreadable, key=lambda u: str(u.path)))


def _reason(error: Exception, folder: Path) -> str:
    """The error's text without the folder's own path (the line names it already)."""
    text = str(error)
    for path in (folder.resolve(), folder):
        text = text.replace(f"{path}{os.sep}", "").replace(str(path), "the folder")
    return text


def resolve_run(text: str, search_root: Path | None = None, *, lenient: bool = False) -> RunRecord:
    """A RUN argument: a run folder path, or a run id (or unique prefix) under `search_root`;
    `lenient`: see `RunRecord`."""
    path = Path(text).expanduser()
    if path.exists():
        return load_run(path, lenient=lenient)
    if "/" in text or os.sep in text:
        raise RunToolError(f"no such run folder: {text}")
    root = Path.cwd() if search_root is None else Path(search_root)
    folders = find_run_dirs(root)
    matches = [f for f in folders if f.name == text] or [
        f for f in folders if f.name.startswith(text)
    ]
    if not matches:
        raise RunToolError(f"no run {text!r} under {root} (give a results/<run-id> path)")
    if len(matches) > 1:
        shown = ", ".join(str(m) for m in matches[:3])
        raise RunToolError(f"{len(matches)} runs match {text!r}: {shown}; give the folder path")
    return load_run(matches[0], lenient=lenient)

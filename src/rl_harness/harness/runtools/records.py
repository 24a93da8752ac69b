"""Reading a run's records (results/<run-id>/) and finding runs under a folder."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rl_harness.harness.liveness import StatusCheck, check_status
from rl_harness.harness.metrics import METRICS_NAME, read_metrics
from rl_harness.harness.names import CONFIG_NAME
from rl_harness.harness.provenance import MANIFEST_NAME
from rl_harness.harness.runners import SUMMARY_NAME
from rl_harness.harness.runtools.args import RunToolError

RESULT_NAME = "result.json"
HEADLINE_METRIC = "env_runners/episode_return_mean"
# Folders never searched for runs: environments, VCS data, large ignored outputs.
_SKIPPED_DIRS = {"artifacts", "node_modules", "__pycache__", "site-packages"}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RunToolError(f"{path} is not valid JSON: {error}") from None


@dataclass(frozen=True)
class RunRecord:
    """One results/<run-id>/ folder: its manifest plus, lazily, metrics, summary and result."""

    path: Path
    manifest: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @cached_property
    def status_check(self) -> StatusCheck:
        """The status readers report (`crashed` for a running record whose process is gone)."""
        return check_status(self.manifest)

    @property
    def status(self) -> str:
        """The record's status, or `crashed` (liveness.py); the manifest is never rewritten."""
        return self.status_check.status

    @property
    def recorded_status(self) -> str:
        return str(self.manifest.get("status", "unknown"))

    def section(self, name: str) -> dict[str, Any]:
        value = self.manifest.get(name)
        return value if isinstance(value, dict) else {}

    @cached_property
    def metrics_rows(self) -> list[dict[str, Any]]:
        path = self.path / METRICS_NAME
        return read_metrics(path) if path.is_file() else []

    @property
    def has_metrics(self) -> bool:
        return (self.path / METRICS_NAME).is_file()

    @cached_property
    def summary(self) -> dict[str, Any] | None:
        path = self.path / SUMMARY_NAME
        return _read_json(path) if path.is_file() else None

    @cached_property
    def config(self) -> dict[str, Any] | None:
        """config.json: the resolved AlgorithmConfig the run trained with (None if absent)."""
        path = self.path / CONFIG_NAME
        value = _read_json(path) if path.is_file() else None
        return value if isinstance(value, dict) else None

    @cached_property
    def result(self) -> Any | None:
        path = self.path / RESULT_NAME
        return _read_json(path) if path.is_file() else None

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
        name = self.section(repo_section).get("patch_file")
        if not name or not (self.path / name).is_file():
            return None
        return (self.path / name).read_text(encoding="utf-8", errors="replace")


def load_run(path: Path) -> RunRecord:
    """The run in `path` (a results/<run-id>/ folder or its run_manifest.json)."""
    path = Path(path).expanduser()
    if path.name == MANIFEST_NAME and path.is_file():
        path = path.parent
    manifest_file = path / MANIFEST_NAME
    if not manifest_file.is_file():
        raise RunToolError(f"{path} is not a run folder (no {MANIFEST_NAME})")
    manifest = _read_json(manifest_file)
    if not isinstance(manifest, dict):
        raise RunToolError(f"{manifest_file} does not hold a manifest object")
    return RunRecord(path.resolve(), manifest)


def find_run_dirs(root: Path) -> list[Path]:
    """Every folder at or under `root` holding a run_manifest.json (hidden folders skipped)."""
    root = Path(root)
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        if MANIFEST_NAME in files:
            found.append(Path(folder))
            dirs[:] = []  # a run folder holds no further runs
    return found


def find_runs(root: Path) -> list[RunRecord]:
    """The runs under `root`, oldest first; unreadable manifests are skipped."""
    records = []
    for folder in find_run_dirs(root):
        try:
            records.append(load_run(folder))
        except RunToolError:
            continue
    return sorted(records, key=lambda r: (str(r.manifest.get("started_at") or ""), r.run_id))


def resolve_run(text: str, search_root: Path | None = None) -> RunRecord:
    """A RUN argument: a run folder path, or a run id (or unique prefix) under `search_root`."""
    path = Path(text).expanduser()
    if path.exists():
        return load_run(path)
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
    return load_run(matches[0])

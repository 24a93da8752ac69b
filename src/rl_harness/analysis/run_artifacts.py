"""`RunArtifacts`: read one run's records (manifest, metrics, summary) and find its checkpoints.

A run lives in two folders made by the harness: `results/<run-id>/` (run_manifest.json,
metrics.jsonl, summary.json, recipe outputs) and `artifacts/<run-id>/` (checkpoints under
`checkpoints/iter_NNNNNN`). The artifacts folder is found from the manifest
(`artifacts.local`), else from the summary's checkpoint paths, else by the layout
convention `<leaf>/results/<id>` -> `<leaf>/artifacts/<id>`; the first that exists wins, so a
run copied to another machine still resolves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl_harness.harness.atomic import read_json
from rl_harness.harness.metrics import METRICS_NAME, read_metrics
from rl_harness.harness.provenance import MANIFEST_NAME
from rl_harness.harness.runners import CHECKPOINTS_DIR, SUMMARY_NAME


def _read_optional(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return read_json(path)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error


def _is_checkpoint(path: Path) -> bool:
    return (path / "rllib_checkpoint.json").is_file()


@dataclass(frozen=True)
class RunArtifacts:
    results_dir: Path
    manifest: dict[str, Any] | None
    summary: dict[str, Any] | None
    artifacts_dir: Path | None

    @classmethod
    def open(cls, results_dir: Path) -> RunArtifacts:
        """Read the run whose compact records are in `results_dir` (a results/<run-id>)."""
        results_dir = Path(results_dir).expanduser().resolve()
        if not results_dir.is_dir():
            raise FileNotFoundError(f"no run folder at {results_dir}")
        manifest = _read_optional(results_dir / MANIFEST_NAME)
        summary = _read_optional(results_dir / SUMMARY_NAME)
        if manifest is None and summary is None:
            raise FileNotFoundError(
                f"{results_dir} holds neither {MANIFEST_NAME} nor {SUMMARY_NAME}: not a run folder"
            )
        return cls(results_dir, manifest, summary, _find_artifacts(results_dir, manifest, summary))

    @property
    def run_id(self) -> str:
        for record in (self.manifest, self.summary):
            if record and record.get("run_id"):
                return str(record["run_id"])
        return self.results_dir.name

    @property
    def status(self) -> str | None:
        """The manifest's status (running / completed / failed / interrupted)."""
        return self.manifest.get("status") if self.manifest else None

    @property
    def seed(self) -> int | None:
        for record in (self.manifest, self.summary):
            if record and record.get("seed") is not None:
                return int(record["seed"])
        return None

    def metrics(self) -> list[dict[str, Any]]:
        """Rows of metrics.jsonl (empty if the run logged none)."""
        path = self.results_dir / METRICS_NAME
        return read_metrics(path) if path.is_file() else []

    def metric(self, key: str, x_key: str = "training_iteration") -> tuple[np.ndarray, np.ndarray]:
        """(x, y) arrays over the rows that hold both keys with a value."""
        every = self.metrics()
        rows = [r for r in every if r.get(key) is not None and r.get(x_key) is not None]
        if every and not rows:
            known = sorted({k for row in every for k in row})
            raise KeyError(f"no metrics row holds {key!r} and {x_key!r}; keys: {known}")
        return (
            np.asarray([r[x_key] for r in rows], dtype=np.float64),
            np.asarray([r[key] for r in rows], dtype=np.float64),
        )

    def checkpoints(self) -> list[Path]:
        """Checkpoint folders under artifacts/<run-id>/checkpoints, oldest first."""
        if self.artifacts_dir is None:
            return []
        folder = self.artifacts_dir / CHECKPOINTS_DIR
        return sorted(p for p in folder.glob("iter_*") if _is_checkpoint(p))

    def final_checkpoint(self) -> Path:
        """The summary's final checkpoint if it is here, else the newest one found."""
        named = (self.summary or {}).get("final_checkpoint")
        if named:
            path = Path(named)
            if _is_checkpoint(path):
                return path
            if self.artifacts_dir is not None:
                moved = self.artifacts_dir / CHECKPOINTS_DIR / path.name
                if _is_checkpoint(moved):
                    return moved
        found = self.checkpoints()
        if not found:
            raise FileNotFoundError(
                f"run {self.run_id} has no checkpoint (artifacts folder: {self.artifacts_dir})"
            )
        return found[-1]

    def read_json(self, name: str) -> dict[str, Any]:
        """Another JSON record of the run, e.g. a recipe's probe_metrics.json."""
        path = self.results_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"run {self.run_id} has no {name} in {self.results_dir}")
        return read_json(path)


def _find_artifacts(
    results_dir: Path, manifest: dict[str, Any] | None, summary: dict[str, Any] | None
) -> Path | None:
    candidates: list[Path] = []
    local = ((manifest or {}).get("artifacts") or {}).get("local")
    if local:
        candidates.append(Path(local))
    final = (summary or {}).get("final_checkpoint")
    if final:
        candidates.append(Path(final).parent.parent)  # <artifacts>/checkpoints/iter_N
    candidates.append(results_dir.parent.parent / "artifacts" / results_dir.name)
    for path in candidates:
        if path.is_dir():
            return path.resolve()
    return None

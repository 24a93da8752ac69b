"""`RunArtifacts`: one run's records (manifest, metrics, summary, config) and its checkpoints.

A run lives in two folders made by the harness: `results/<run-id>/` (run_manifest.json,
metrics.jsonl, summary.json, recipe outputs) and `artifacts/<run-id>/` (checkpoints under
`checkpoints/iter_NNNNNN`); harness/layout.py names every file. `RunArtifacts` is the run
tools' reader (`RunRecord`: records, status, the artifacts folder found from the manifest,
else beside the results folder, so a run copied to another machine still resolves) plus the
checkpoints and Tune trials analysis needs.

`status` is the manifest's, except that a `running` record whose process is gone (SIGKILL,
out of memory) reads `crashed` (harness/liveness.py; the record is left as it is). `config`
is config.json (what was trained); `run_checkpoints(run)` (checkpoints.py) lists the
checkpoints with their iteration and env steps.

A Tune run (`run_tune`) keeps its trials under `artifacts/<run-id>/tune/experiment/<trial>/`
(`checkpoint_NNNNNN` folders); `trials()` lists them with the summary's status and the
trial's rows of metrics.jsonl, and `final_checkpoint(trial=...)` finds a trial's checkpoint.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl_harness.harness.layout import direct_checkpoints, is_checkpoint
from rl_harness.harness.metric_keys import ITERATION_KEY
from rl_harness.harness.runtools.records import RunRecord


@dataclass(frozen=True)
class TrialArtifacts:
    """One trial of a Tune run: its record, its metrics rows and its checkpoints."""

    trial_id: str
    seed: int | None
    status: str  # the summary's completed / failed, else "unknown" (no summary yet)
    iterations: int
    final_metrics: dict[str, Any]
    metrics: list[dict[str, Any]]  # this trial's rows of metrics.jsonl
    checkpoints: list[Path]  # found on disk, oldest first
    final_checkpoint: Path | None  # the summary's (relocated if moved), else the newest
    best_checkpoint: Path | None  # by the run's checkpoint_score_attribute, when it had one
    trial_dir: Path | None


def _trial_id_of(trial_dir: Path) -> str | None:
    """The trial id Tune wrote into the trial folder's result.json (first row)."""
    path = trial_dir / "result.json"
    if path.is_file():
        with path.open(encoding="utf-8") as handle:
            first = handle.readline().strip()
        if first:
            try:
                return str(json.loads(first).get("trial_id"))
            except json.JSONDecodeError:
                return None
    return None


def _in_trial(recorded: Path | str | None, folder: Path | None) -> Path | None:
    """A recorded trial checkpoint if it is there, else the same name in the trial folder
    found on disk (a bucket's URI, fetched; a record holding a path from another machine)."""
    if recorded is None:
        return None
    path = Path(recorded)
    if is_checkpoint(path):
        return path
    if folder is not None and is_checkpoint(folder / path.name):
        return folder / path.name
    return None


@dataclass(frozen=True)
class RunArtifacts(RunRecord):
    """A run's records (`RunRecord`) with its checkpoints and Tune trials."""

    @classmethod
    def open(cls, results_dir: Path) -> RunArtifacts:
        """Read the run whose compact records are in `results_dir` (a results/<run-id>)."""
        results_dir = Path(results_dir).expanduser().resolve()
        if not results_dir.is_dir():
            raise FileNotFoundError(f"no run folder at {results_dir}")
        run = cls.read(results_dir)
        if run.manifest is None and run.summary is None:
            raise FileNotFoundError(
                f"{results_dir} holds neither {run.paths.manifest.name} nor "
                f"{run.paths.summary.name}: not a run folder"
            )
        return run

    def metric(self, key: str, x_key: str = ITERATION_KEY) -> tuple[np.ndarray, np.ndarray]:
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
        return direct_checkpoints(self.paths.checkpoints_dir)

    @property
    def is_tune(self) -> bool:
        return (self.summary or {}).get("runner") == "tune" or self.experiment_dir is not None

    @property
    def experiment_dir(self) -> Path | None:
        """The Tune experiment folder: the summary's, else artifacts/<run-id>/tune/experiment."""
        recorded = (self.summary or {}).get("experiment_path")
        local = self.paths.tune_experiment
        if recorded and str(recorded).startswith("s3://"):
            # Tune stored the experiment on the bucket (docs/multi_node.md): fetch it once
            # into the run's artifacts folder, then read it like a local one.
            return _fetched_once(str(recorded), local)
        named = self.paths.resolve(recorded)
        candidates = [Path(named)] if named is not None else []
        if self.artifacts_dir is not None:
            candidates.append(local)
        return next((path for path in candidates if path.is_dir()), None)

    def trials(self) -> list[TrialArtifacts]:
        """A Tune run's trials (summary order, then trials found only on disk); [] otherwise."""
        recorded = {str(t.get("trial_id")): t for t in (self.summary or {}).get("trials") or []}
        folders: dict[str, Path] = {}
        if self.experiment_dir is not None:
            for folder in sorted(p for p in self.experiment_dir.iterdir() if p.is_dir()):
                trial_id = _trial_id_of(folder)
                if trial_id is not None:
                    folders[trial_id] = folder
        rows: dict[str, list[dict[str, Any]]] = {}
        for row in self.metrics():
            if row.get("trial_id") is not None:
                rows.setdefault(str(row["trial_id"]), []).append(row)
        found = []
        for trial_id in [*recorded, *(t for t in folders if t not in recorded)]:
            record = recorded.get(trial_id, {})
            trial_folder = folders.get(trial_id)
            own = rows.get(trial_id, [])
            on_disk = (
                sorted(p for p in trial_folder.glob("checkpoint_*") if is_checkpoint(p))
                if trial_folder
                else []
            )
            final = _in_trial(self.paths.resolve(record.get("checkpoint")), trial_folder) or (
                on_disk[-1] if on_disk else None
            )
            seed = record.get("seed", own[-1].get("seed") if own else None)
            found.append(
                TrialArtifacts(
                    trial_id=trial_id,
                    seed=int(seed) if isinstance(seed, int) else None,
                    status=str(record.get("status") or "unknown"),
                    iterations=int(
                        record.get("iterations") or (own[-1].get(ITERATION_KEY) if own else 0) or 0
                    ),
                    final_metrics=record.get("final_metrics") or (own[-1] if own else {}),
                    metrics=own,
                    checkpoints=on_disk,
                    final_checkpoint=final,
                    best_checkpoint=_in_trial(
                        self.paths.resolve(record.get("best_checkpoint")), trial_folder
                    ),
                    trial_dir=trial_folder,
                )
            )
        return found

    def trial(self, trial: str | int) -> TrialArtifacts:
        """One trial by id (or unique id prefix), or by seed (an int)."""
        trials = self.trials()
        if not trials:
            raise FileNotFoundError(f"run {self.run_id} is not a Tune run with trials")
        if isinstance(trial, int) and not isinstance(trial, bool):
            matches = [t for t in trials if t.seed == trial]
        else:
            matches = [t for t in trials if t.trial_id == trial] or [
                t for t in trials if t.trial_id.startswith(str(trial))
            ]
        if len(matches) != 1:
            known = ", ".join(f"{t.trial_id} (seed {t.seed})" for t in trials)
            what = "no trial" if not matches else f"{len(matches)} trials"
            raise KeyError(f"{what} {trial!r} in Tune run {self.run_id}; its trials: {known}")
        return matches[0]

    def final_checkpoint(self, trial: str | int | None = None) -> Path:
        """The run's final checkpoint; for a Tune run, that of `trial` (id, id prefix or seed;
        optional when the run has one trial). The summary's if it is here (or was moved with
        the run), else the newest one found."""
        if trial is not None or self.is_tune:
            return self._trial_checkpoint(trial)
        named = self.paths.resolve((self.summary or {}).get("final_checkpoint"))
        if named is not None and is_checkpoint(Path(named)):
            return Path(named)
        found = self.checkpoints()
        if not found:
            raise FileNotFoundError(
                f"run {self.run_id} has no checkpoint (artifacts folder: {self.artifacts_dir})"
            )
        return found[-1]

    def _trial_checkpoint(self, trial: str | int | None) -> Path:
        if trial is None:
            trials = self.trials()
            if len(trials) != 1:
                known = ", ".join(t.trial_id for t in trials) or "none"
                raise ValueError(
                    f"Tune run {self.run_id} has {len(trials)} trials ({known}); "
                    "pass final_checkpoint(trial=<trial id or seed>)"
                )
            chosen = trials[0]
        else:
            chosen = self.trial(trial)
        if chosen.final_checkpoint is None:
            raise FileNotFoundError(
                f"trial {chosen.trial_id} of run {self.run_id} has no checkpoint "
                f"(trial folder: {chosen.trial_dir})"
            )
        return chosen.final_checkpoint


@functools.cache
def _fetched_once(uri: str, dest: Path) -> Path:
    from rl_harness.harness.storage.tune_storage import fetch_tree

    return fetch_tree(uri, dest)

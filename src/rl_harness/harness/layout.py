"""The run folder: every record and artifact name, checkpoint naming and resolution.

A run lives in two folders, `<leaf>/results/<run-id>/` (compact records, tracked) and
`<leaf>/artifacts/<run-id>/` (large outputs, ignored):

    results/<run-id>/                        artifacts/<run-id>/
      run_manifest.json  provenance            checkpoints/iter_NNNNNN/   direct runner
      config.json        resolved config       tune/experiment/<trial>/   Tune (its
      metrics.jsonl      one row per iteration   checkpoint_NNNNNN/, initial_checkpoint/)
      checkpoints.jsonl  one row per checkpoint ray_logs/ (driver.log)   Ray's session logs
      summary.json       the runner's summary    tensorboard/<name>/, wandb/  --log-to
      result.json        the recipe's result
      error.txt, experiment_repo.patch, library_repo.patch, remote_artifacts.json,
      analysis_provenance.json (rl-harness analyze: each analysis stage's provenance)

Checkpoint paths in the records (checkpoints.jsonl, summary.json) are relative to
artifacts/<run-id>/, so a run folder copied elsewhere still resolves; a checkpoint outside
it (or a URI: Tune on a bucket) is recorded as it is. Records written before that held
absolute paths: `RunPaths.resolve` still reads them, and finds such a checkpoint by its
name in this run's artifacts folder when the run was moved.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rl_harness.harness.locations import is_uri

# results/<run-id>/
MANIFEST_NAME = "run_manifest.json"  # provenance (provenance.py)
CONFIG_NAME = "config.json"  # the resolved AlgorithmConfig, redacted (configrecord.py)
METRICS_NAME = "metrics.jsonl"  # one compact row per training iteration (metrics.py)
CHECKPOINT_LOG_NAME = "checkpoints.jsonl"  # one row per saved checkpoint (checkpointing.py)
SUMMARY_NAME = "summary.json"  # the runner's summary (runners/)
RESULT_NAME = "result.json"  # the mapping a recipe's run() returned (lifecycle.py)
ERROR_NAME = "error.txt"  # the traceback of a failed recipe
EXPERIMENT_PATCH_NAME = "experiment_repo.patch"  # uncommitted changes at start
LIBRARY_PATCH_NAME = "library_repo.patch"
REMOTE_INDEX_NAME = "remote_artifacts.json"  # the B2 mirror's index (storage/)
# Each analysis stage's provenance, keyed by stage (analysis/stages.py, `rl-harness analyze`).
ANALYSIS_PROVENANCE_NAME = "analysis_provenance.json"

# artifacts/<run-id>/
CHECKPOINTS_DIR = "checkpoints"  # the direct runner's iter_NNNNNN folders
TUNE_DIR = "tune"  # Tune's storage path (local runs)
TUNE_EXPERIMENT = "experiment"  # Tune's experiment name: tune/experiment/<trial>/
TUNE_INITIAL_CHECKPOINT = "initial_checkpoint"  # in a Tune trial folder: step 0
RAY_LOGS_DIR = "ray_logs"  # Ray's session logs and its driver log lines
RAY_DRIVER_LOG = "driver.log"  # in RAY_LOGS_DIR: Ray's log records from the driver process
TENSORBOARD_DIR = "tensorboard"  # --log-to tensorboard: one folder per run or trial
CONSOLE_LOG_NAME = "console.log"  # a sweep's child run: its console output (sweep.py)

RESULTS_PARENT, ARTIFACTS_PARENT = "results", "artifacts"  # the leaf's default parents
RLLIB_CHECKPOINT_FILE = "rllib_checkpoint.json"  # marks an RLlib checkpoint folder
DIRECT_CHECKPOINT_PREFIX = "iter_"


def checkpoint_name(iteration: int) -> str:
    """The direct runner's checkpoint folder after `iteration` iterations."""
    return f"{DIRECT_CHECKPOINT_PREFIX}{int(iteration):06d}"


def is_checkpoint(path: Path) -> bool:
    return (Path(path) / RLLIB_CHECKPOINT_FILE).is_file()


def direct_checkpoints(folder: Path) -> list[Path]:
    """The direct runner's checkpoints in `folder`, oldest first."""
    return sorted(p for p in Path(folder).glob(f"{DIRECT_CHECKPOINT_PREFIX}*") if is_checkpoint(p))


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint folder itself, or the newest one under `<dir>/checkpoints/` (or `<dir>`)."""
    path = Path(path).resolve()
    if is_checkpoint(path):
        return path
    folder = path / CHECKPOINTS_DIR if (path / CHECKPOINTS_DIR).is_dir() else path
    candidates = direct_checkpoints(folder)
    if not candidates:
        raise FileNotFoundError(f"no RLlib checkpoint at or under {path}")
    return candidates[-1]


def conventional_artifacts_dir(results_dir: Path) -> Path:
    """`<leaf>/artifacts/<run-id>` beside `<leaf>/results/<run-id>` (the default layout)."""
    results_dir = Path(results_dir)
    return results_dir.parent.parent / ARTIFACTS_PARENT / results_dir.name


@dataclass(frozen=True)
class RunPaths:
    """Where every record and artifact of one run lives."""

    results_dir: Path  # results/<run-id>/
    artifacts_dir: Path  # artifacts/<run-id>/

    @classmethod
    def beside(cls, results_dir: Path) -> RunPaths:
        """The paths of the run in `results_dir`, its artifacts where the layout puts them."""
        return cls(Path(results_dir), conventional_artifacts_dir(results_dir))

    # results/<run-id>/
    @property
    def manifest(self) -> Path:
        return self.results_dir / MANIFEST_NAME

    @property
    def config(self) -> Path:
        return self.results_dir / CONFIG_NAME

    @property
    def metrics(self) -> Path:
        return self.results_dir / METRICS_NAME

    @property
    def checkpoint_log(self) -> Path:
        return self.results_dir / CHECKPOINT_LOG_NAME

    @property
    def summary(self) -> Path:
        return self.results_dir / SUMMARY_NAME

    @property
    def result(self) -> Path:
        return self.results_dir / RESULT_NAME

    @property
    def error(self) -> Path:
        return self.results_dir / ERROR_NAME

    @property
    def remote_index(self) -> Path:
        return self.results_dir / REMOTE_INDEX_NAME

    # artifacts/<run-id>/
    @property
    def checkpoints_dir(self) -> Path:
        return self.artifacts_dir / CHECKPOINTS_DIR

    def checkpoint(self, iteration: int) -> Path:
        """Where the direct runner saves its checkpoint after `iteration` iterations."""
        return self.checkpoints_dir / checkpoint_name(iteration)

    @property
    def tune_dir(self) -> Path:
        return self.artifacts_dir / TUNE_DIR

    @property
    def tune_experiment(self) -> Path:
        return self.tune_dir / TUNE_EXPERIMENT

    @property
    def ray_logs(self) -> Path:
        return self.artifacts_dir / RAY_LOGS_DIR

    def tensorboard(self, name: str) -> Path:
        """A run's (or a Tune trial's, `run-id/trial-id`) TensorBoard folder."""
        return self.artifacts_dir / TENSORBOARD_DIR / name.replace("/", "_")

    # checkpoint paths in the records
    def record(self, path: str | Path) -> str:
        """How a path is recorded: relative to artifacts/<run-id>/ when inside it, else as
        it is (a URI, or a local path elsewhere)."""
        if is_uri(str(path)):
            return str(path)
        try:
            return Path(path).resolve().relative_to(self.artifacts_dir.resolve()).as_posix()
        except ValueError:
            return str(path)

    def resolve(self, recorded: str | None) -> Path | str | None:
        """A recorded path as it is now: a URI as is, a relative path under this run's
        artifacts folder. An absolute path (a record from before paths were relative) is
        kept if it exists, else taken to be a checkpoint of this run that moved with it:
        its folder name under `checkpoints/`, or under the Tune trial folder it named."""
        if not recorded:
            return None
        if is_uri(recorded):
            return recorded
        path = Path(recorded)
        if not path.is_absolute():
            return self.artifacts_dir / path
        if path.exists():
            return path
        for moved in self._moved(path):
            if moved.exists():
                return moved
        return path

    def _moved(self, old: Path) -> list[Path]:
        parts = old.parts
        if TUNE_DIR in parts:  # .../<run-id>/tune/experiment/<trial>/<checkpoint>
            start = len(parts) - 1 - parts[::-1].index(TUNE_DIR)
            return [self.artifacts_dir.joinpath(*parts[start:])]
        return [self.checkpoints_dir / old.name]

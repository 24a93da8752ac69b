"""The Tune runner: sweeps (per-trial seeds, search spaces, schedulers), recorded like a run."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray import tune
from ray.tune.result import SHOULD_CHECKPOINT

from rl_harness.harness import interrupts
from rl_harness.harness.checkpointing import (
    CheckpointLog,
    CheckpointSchedule,
    as_schedule,
    env_steps_of,
)
from rl_harness.harness.configrecord import flat_config, trial_config_record
from rl_harness.harness.console import Progress, get_logger
from rl_harness.harness.context import RunContext
from rl_harness.harness.interrupts import COMPLETED, FAILED, INTERRUPTED, RunInterrupted
from rl_harness.harness.layout import TUNE_EXPERIMENT, TUNE_INITIAL_CHECKPOINT, is_checkpoint
from rl_harness.harness.locations import location_text
from rl_harness.harness.metric_keys import ITERATION_KEY
from rl_harness.harness.metrics import MetricsLog, compact_metrics, flatten
from rl_harness.harness.mirrors import Mirrors, open_mirrors
from rl_harness.harness.runners.common import (
    ensure_ray,
    normalize_stop,
    preflight,
    prepare_config,
    progress,
    should_stop,
    steps_before,
    write_config,
    write_summary,
)

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.tune import Checkpoint
    from ray.tune.experiment import Trial

log = get_logger(__package__)  # both runners log as rl_harness.harness.runners


@dataclass
class TrialRecord:
    trial_id: str
    seed: int | None
    status: str
    iterations: int
    final_metrics: dict[str, Any]
    checkpoint_path: Path | None
    checkpoints: list[Path] = field(default_factory=list)  # those Tune kept, oldest first
    best_checkpoint: Path | None = None  # by checkpoint_score_attribute, when given
    config: dict[str, Any] | None = None  # the trial's resolved config (configrecord.py)

    def summary(self, record: Callable[[Path], str]) -> dict[str, Any]:
        """The trial's row in summary.json, its checkpoints as `record` writes them."""
        row = asdict(self)
        del row["checkpoint_path"]
        row["checkpoint"] = record(self.checkpoint_path) if self.checkpoint_path else None
        row["checkpoints"] = [record(path) for path in self.checkpoints]
        row["best_checkpoint"] = record(self.best_checkpoint) if self.best_checkpoint else None
        return row


@dataclass
class TuneRunResult:
    """Our summary of a Tune run, and Tune's own `ResultGrid` for anything beyond it."""

    trials: list[TrialRecord]
    experiment_path: Path
    wall_time_s: float = 0.0
    result_grid: Any = None  # ray.tune.ResultGrid


@dataclass(frozen=True)
class TuneSummary:
    """summary.json of a Tune run: local paths relative to artifacts/<run-id>/, paths on a
    bucket as s3:// URIs."""

    status: str
    experiment_path: str
    resumed_from: str | None
    stop: dict[str, float]
    checkpoint_score_attribute: str | None
    trials: list[dict[str, Any]]
    wall_time_s: float
    runner: str = "tune"


@dataclass(frozen=True)
class TuneRun:
    """What the metrics callback records into: the run calling `tuner.fit()`."""

    context: RunContext
    stop: dict[str, float]
    schedule: CheckpointSchedule
    config: AlgorithmConfig
    storage_fs: Any  # pyarrow filesystem of Tune's storage (None: the local disk)


# The run being fitted in this thread. Tune pickles the callback with its experiment and
# Tuner.restore brings that copy back, so the callback binds to the run fitting now at
# setup(): a resumed sweep's rows belong to the resuming run's records, never to the
# interrupted run's. A context variable, so two runs in two threads never share one.
_fitting: ContextVar[TuneRun] = ContextVar("rl_harness_tune_run")


@contextmanager
def _fitting_run(run: TuneRun) -> Iterator[None]:
    token = _fitting.set(run)
    try:
        yield
    finally:
        _fitting.reset(token)


def _trial_seed(trial_config: Mapping[str, Any]) -> int | None:
    seed = trial_config.get("seed")
    return int(seed) if isinstance(seed, int) else None


class HarnessMetricsCallback(tune.Callback):
    """Runs in the driver: one compact row per trial result, tagged with trial id and seed.

    Also notes which trials Tune completed: a trial stopped by its criterion, a stopper or a
    scheduler completes; one cut short by Ctrl-C never does. After SIGTERM/SIGINT
    (interrupts.py) it asks Tune for a checkpoint at each running trial's next result
    (results may be changed in place here) and stops Tune once every one is saved.
    """

    def __init__(self, run: TuneRun) -> None:
        self._bind(run)

    def _bind(self, run: TuneRun) -> None:
        self.run = run
        self.log = MetricsLog(run.context.paths.metrics)
        self.checkpoint_log = CheckpointLog(run.context.paths)
        self.completed: set[str] = set()
        self.mirrors: dict[str, Mirrors] = {}  # --log-to, one per trial, opened lazily
        self.saved: set[str] = set()
        self.progress: dict[str, Progress] = {}
        self.last_steps: dict[str, int | None] = {}  # per trial, for log-spaced saves
        self.reasons: dict[str, list[str]] = {}  # per trial: why its next save happens

    def setup(
        self,
        stop: tune.Stopper | None = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        self._bind(_fitting.get(self.run))
        interrupts.take_over_tune_sigint()

    def on_trial_result(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        result: dict[str, Any],
        **info: Any,
    ) -> None:
        interrupts.tune_result_seen()
        context = self.run.context
        trial_id = trial.trial_id
        seed = _trial_seed(trial.config)
        row = {"trial_id": trial_id, "seed": seed}
        row.update(compact_metrics(result))
        self.log.append(row)
        label = f"{context.run_id}/{trial_id}"
        if context.log_to:
            if trial_id not in self.mirrors:
                params = flat_config(trial_config_record(self.run.config, trial.config))
                self.mirrors[trial_id] = open_mirrors(context, label, seed, params)
            self.mirrors[trial_id].log(row)
        if trial_id not in self.progress:
            self.progress[trial_id] = progress(label, self.run.stop)
            self._note_initial_checkpoint(trial, seed)
        log.info(self.progress[trial_id].line(row))
        iteration_now = int(row.get(ITERATION_KEY) or 0)
        steps = env_steps_of(row)
        reasons = self.run.schedule.reasons(
            iteration_now,
            steps,
            previous_iteration=iteration_now - 1,
            previous_env_steps=steps_before(row, self.last_steps.get(trial_id)),
        )
        self.last_steps[trial_id] = steps
        self.reasons[trial_id] = reasons
        if "log" in reasons:
            result[SHOULD_CHECKPOINT] = True  # Tune's checkpoint_frequency does "every"
        if interrupts.stop_requested() is not None:
            result[SHOULD_CHECKPOINT] = True

    def _note_initial_checkpoint(self, trial: Trial, seed: int | None) -> None:
        """Step 0's checkpoint (saved in the trial at its start): its checkpoints.jsonl row."""
        from rl_harness.harness.storage import tune_storage as remote

        if not self.run.schedule.at_start or trial.path is None:
            return
        path = f"{trial.path}/{TUNE_INITIAL_CHECKPOINT}"
        if self.run.storage_fs is None and not is_checkpoint(Path(path)):
            return  # not saved (a restored trial keeps its row in the first run's records)
        self.checkpoint_log.append(
            remote.as_uri(path, self.run.storage_fs),
            iteration=0,
            env_steps=0,
            reasons=["start"],
            trial_id=trial.trial_id,
            seed=seed,
        )

    def on_checkpoint(
        self,
        iteration: int,
        trials: list[Trial],
        trial: Trial,
        checkpoint: Checkpoint,
        **info: Any,
    ) -> None:
        from rl_harness.harness.storage import tune_storage as remote

        last = trial.last_result or {}
        reasons = self.reasons.pop(trial.trial_id, None) or ["final"]
        if interrupts.stop_requested() is not None and reasons == ["final"]:
            reasons = ["interrupt"]
        self.checkpoint_log.append(
            remote.as_uri(checkpoint.path, self.run.storage_fs),
            iteration=int(last.get(ITERATION_KEY) or 0),
            env_steps=env_steps_of(last),
            reasons=reasons,
            trial_id=trial.trial_id,
            seed=_trial_seed(trial.config),
        )
        if interrupts.stop_requested() is not None:
            self.saved.add(trial.trial_id)
            self._stop_when_saved(trials)

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self.completed.add(trial.trial_id)
        self._close(trial.trial_id, COMPLETED)
        if interrupts.stop_requested() is not None:
            self._stop_when_saved(trials)

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        self._close(trial.trial_id, FAILED)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        for trial_id in list(self.mirrors):
            self._close(trial_id, INTERRUPTED)

    def _close(self, trial_id: str, status: str) -> None:
        mirrors = self.mirrors.pop(trial_id, None)
        if mirrors is not None:
            mirrors.close(status)

    def _stop_when_saved(self, trials: list[Trial]) -> None:
        running = {t.trial_id for t in trials if t.status == "RUNNING"}
        if running <= self.saved:
            interrupts.stop_tune()


class StopCriteriaOrStopper(tune.Stopper):
    """Tune's stop argument when the caller gives a stopper: our criteria, or-ed with it."""

    def __init__(self, stop: dict[str, float], stopper: Any) -> None:
        self.stop, self.stopper = stop, stopper

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return should_stop(flatten(result), self.stop) or bool(self.stopper(trial_id, result))

    def stop_all(self) -> bool:
        return bool(self.stopper.stop_all()) if isinstance(self.stopper, tune.Stopper) else False


def _save_initial_checkpoint(algorithm: Algorithm, **kwargs: Any) -> None:
    """RLlib's on_algorithm_init in a Tune trial: step 0's checkpoint, before any training,
    saved as <trial folder>/initial_checkpoint on Tune's storage (kept if already there, as
    when a trial is restored)."""
    from pyarrow import fs

    # A class trainable has no Tune session (tune.get_context().get_storage() is None there);
    # Tune hands it its StorageContext, kept as `_storage` (no public accessor in Ray 2.60).
    storage = getattr(algorithm, "_storage", None)
    if storage is None or getattr(storage, "trial_dir_name", None) is None:
        return  # not inside a Tune trial (e.g. an algorithm restored for analysis)
    path = f"{storage.trial_fs_path}/{TUNE_INITIAL_CHECKPOINT}"
    filesystem = storage.storage_filesystem
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        return
    algorithm.save_to_path(path, filesystem=filesystem)


def _with_initial_checkpoint(config: AlgorithmConfig) -> AlgorithmConfig:
    """The config with `_save_initial_checkpoint` after the recipe's own on_algorithm_init."""
    existing = config.callbacks_on_algorithm_init
    chain: list[Callable[..., Any]] = (
        list(existing) if isinstance(existing, list | tuple) else [existing] if existing else []
    )
    config = config.copy(copy_frozen=False)
    config.callbacks(on_algorithm_init=[*chain, _save_initial_checkpoint])
    return config


def run_tune(
    config: AlgorithmConfig,
    context: RunContext,
    *,
    stop: Mapping[str, float] | int,
    seeds: Sequence[int] | None = None,
    param_space: Mapping[str, Any] | None = None,
    num_samples: int = 1,
    checkpoint_every: int = 0,
    checkpoint_schedule: CheckpointSchedule | None = None,
    max_concurrent_trials: int | None = None,
    apply_plan: bool = True,
    num_to_keep: int | None = None,
    checkpoint_score_attribute: str | None = None,
    checkpoint_score_order: str = "max",
    stopper: Callable[[str, dict[str, Any]], bool] | None = None,
    scheduler: Any = None,
    search_alg: Any = None,
    metric: str | None = None,
    mode: str | None = None,
    tune_storage: str = "auto",
) -> TuneRunResult:
    """Run the config under Tune, storing the experiment under artifacts/<run-id>/tune/.

    `seeds` grid-searches the root seed (one trial per seed, recorded per trial);
    without it every trial uses the context's seed. `param_space` adds Tune search
    entries (flat AlgorithmConfig keys). With `context.resume_from` pointing at a Tune
    experiment folder, that experiment is restored and continued instead.

    `checkpoint_every=k` is Tune's checkpoint frequency; `checkpoint_schedule` (a
    `CheckpointSchedule`) adds step 0 (saved in each trial before it trains, as
    `<trial>/initial_checkpoint`) and log-spaced checkpoints. Each checkpoint gets a row in
    results/<run-id>/checkpoints.jsonl; config.json holds the run's config with its search
    entries, and each trial's summary record its resolved config.

    Passed through to Tune: `num_to_keep`, `checkpoint_score_attribute` / `_order`
    (CheckpointConfig), `stopper` (a `tune.Stopper` or `(trial_id, result) -> bool`, or-ed
    with `stop`), `scheduler`, `search_alg`, `metric`, `mode` (TuneConfig). The result
    holds Tune's `ResultGrid` as `result_grid`.

    `tune_storage`: "local" (artifacts/<run-id>/tune), "bucket" (the configured B2/S3 bucket,
    through pyarrow's S3 filesystem; paths recorded as s3:// URIs), or "auto" (the bucket when
    B2 is configured and the Ray cluster has more than one node). See docs/multi_node.md.
    """
    from rl_harness.harness.storage import tune_storage as remote

    stop = normalize_stop(stop)
    schedule = as_schedule(checkpoint_every, checkpoint_schedule)
    config = prepare_config(config, context, apply_plan=apply_plan)
    if schedule.at_start:
        config = _with_initial_checkpoint(config)
    if not param_space:  # search entries may complete the base config: Tune checks those
        preflight(config, context, checkpoint=False)
    ensure_ray(context)
    space: dict[str, Any] = dict(param_space or {})
    if seeds is not None:
        if not seeds:
            raise ValueError("seeds must not be empty")
        space["seed"] = tune.grid_search([int(s) for s in seeds])
    write_config(context, config, space)
    storage_path, storage_fs, _ = remote.tune_storage(
        tune_storage,  # type: ignore[arg-type]
        results_dir=context.results_dir,
        experiment_dir=context.experiment_dir,
        artifacts_dir=context.artifacts_dir,
        run_id=context.run_id,
        local_dir=str(context.paths.tune_dir),
    )
    started = time.perf_counter()
    callback: HarnessMetricsCallback | None = None  # a restored run's is Tune's own copy
    if context.resume_from is not None:
        tuner, storage_fs = _restored_tuner(context, config)
        run = TuneRun(context, stop, schedule, config, storage_fs)
    else:
        run = TuneRun(context, stop, schedule, config, storage_fs)
        callback = HarnessMetricsCallback(run)
        run_config = tune.RunConfig(
            name=TUNE_EXPERIMENT,
            storage_path=storage_path,
            storage_filesystem=storage_fs,
            stop=stop if stopper is None else StopCriteriaOrStopper(stop, stopper),
            verbose=0,
            callbacks=[callback],
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=schedule.every,
                checkpoint_at_end=True,
                num_to_keep=num_to_keep,
                checkpoint_score_attribute=checkpoint_score_attribute,
                checkpoint_score_order=checkpoint_score_order,
            ),
        )
        tuner = tune.Tuner(
            config.algo_class,
            param_space={**config.to_dict(), **space},
            run_config=run_config,
            tune_config=tune.TuneConfig(
                num_samples=num_samples,
                max_concurrent_trials=max_concurrent_trials,
                scheduler=scheduler,
                search_alg=search_alg,
                metric=metric,
                mode=mode,
            ),
        )
    with _fitting_run(run):
        with interrupts.tune_mode():
            grid = tuner.fit()
    # Tune turns Ctrl-C into a graceful stop and returns normally (trials even count as
    # terminated): a trial that ended without error and that Tune never completed was cut
    # short (a restored experiment's callback is Tune's copy: there, one short of its
    # criterion).
    trials = [
        _trial_record(
            result, config, stop, callback, checkpoint_score_attribute, checkpoint_score_order
        )
        for result in grid
    ]
    interrupted = any(t.status == INTERRUPTED for t in trials)
    wall = time.perf_counter() - started
    experiment_path = Path(grid.experiment_path)
    experiment = remote.as_uri(str(experiment_path), storage_fs)

    def record(path: Path) -> str:
        return context.paths.record(remote.as_uri(str(path), storage_fs))

    summary = TuneSummary(
        status=INTERRUPTED
        if interrupted
        else FAILED
        if any(t.status == FAILED for t in trials)
        else COMPLETED,
        experiment_path=context.paths.record(experiment),
        resumed_from=location_text(context.resume_from),
        stop=stop,
        checkpoint_score_attribute=checkpoint_score_attribute,
        trials=[t.summary(record) for t in trials],
        wall_time_s=round(wall, 3),
    )
    write_summary(context, summary)
    if interrupted:
        signum = interrupts.stop_requested() or signal.SIGINT
        log.info(
            f"[{context.run_id}] Tune run stopped early; continue it with "
            f"--resume-from {experiment}"
        )
        raise RunInterrupted(signum)
    errors = [result.error for result in grid if result.error]
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(trials)} Tune trials failed: {errors[0]}")
    return TuneRunResult(trials, experiment_path, wall, grid)


def _restored_tuner(context: RunContext, config: AlgorithmConfig) -> tuple[Any, Any]:
    """(Tuner, storage filesystem) continuing the Tune experiment at `context.resume_from`:
    a local folder, or an s3:// URI on the configured bucket."""
    from rl_harness.harness.storage import tune_storage as remote

    assert context.resume_from is not None  # called only to resume
    if config.algo_class is None:
        raise ValueError("a Tune run needs a config with its algo_class (e.g. PPOConfig())")
    uri = remote.remote_uri(context.resume_from)
    if uri is not None:  # an experiment on the bucket: restore it there
        experiment, storage_fs = remote.bucket_filesystem_for(uri)
    else:
        experiment, storage_fs = str(Path(context.resume_from).resolve()), None
    if not tune.Tuner.can_restore(experiment, storage_filesystem=storage_fs):
        raise FileNotFoundError(f"no restorable Tune experiment at {uri or experiment}")
    log.info(f"[{context.run_id}] restoring Tune experiment {uri or experiment}")
    tuner = tune.Tuner.restore(
        experiment,
        trainable=config.algo_class,
        resume_errored=True,
        storage_filesystem=storage_fs,
    )
    return tuner, storage_fs


def _trial_record(
    result: Any,
    config: AlgorithmConfig,
    stop: dict[str, float],
    callback: HarnessMetricsCallback | None,
    score_attribute: str | None,
    score_order: str,
) -> TrialRecord:
    """One trial of the ResultGrid; `callback` None for a restored experiment."""
    reported = result.metrics or {}
    trial_id = reported.get("trial_id")
    if result.error:
        status = FAILED
    elif callback is None:  # restored: cut short unless it reached its criterion
        status = INTERRUPTED if not should_stop(flatten(reported), stop) else COMPLETED
    else:
        status = INTERRUPTED if trial_id not in callback.completed else COMPLETED
    metrics = compact_metrics(reported)
    return TrialRecord(
        trial_id=str(trial_id),
        seed=_trial_seed(result.config or {}),
        status=status,
        iterations=int(metrics.get(ITERATION_KEY) or 0),
        final_metrics=metrics,
        checkpoint_path=Path(result.checkpoint.path) if result.checkpoint else None,
        checkpoints=sorted(Path(c.path) for c, _ in result.best_checkpoints or []),
        best_checkpoint=_best_checkpoint(result, score_attribute, score_order),
        config=trial_config_record(config, result.config or {}),
    )


def _best_checkpoint(result: Any, attribute: str | None, order: str) -> Path | None:
    if attribute is None or not result.best_checkpoints:
        return None
    try:
        best = result.get_best_checkpoint(attribute, order)
    except (KeyError, RuntimeError, ValueError):  # the attribute was never reported
        return None
    return Path(best.path) if best is not None else None

"""Runners: a direct `algo.train()` loop owned by the harness, and Tune for sweeps.

Both seed from the context, record the resolved config (results/<run-id>/config.json; each
Tune trial's in its summary record), append compact per-iteration metrics to
results/<run-id>/metrics.jsonl with a progress line (env steps/s, ETA), keep checkpoints
under artifacts/<run-id>/ on a `CheckpointSchedule` with a row per checkpoint in
results/<run-id>/checkpoints.jsonl, and write results/<run-id>/summary.json.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rl_harness.harness import interrupts
from rl_harness.harness.atomic import write_json_atomic
from rl_harness.harness.checkpointing import (
    CheckpointLog,
    CheckpointSchedule,
    as_schedule,
    env_steps_of,
)
from rl_harness.harness.configrecord import config_record, flat_config, trial_config_record
from rl_harness.harness.console import Progress, get_logger, stdout_is_terminal
from rl_harness.harness.context import RunContext
from rl_harness.harness.hardware import apply_hardware
from rl_harness.harness.interrupts import COMPLETED, FAILED, INTERRUPTED, RUNNING, RunInterrupted
from rl_harness.harness.locations import is_uri, location_text
from rl_harness.harness.metrics import METRICS_NAME, MetricsLog, compact_metrics, flatten
from rl_harness.harness.mirrors import Mirrors, open_mirrors
from rl_harness.harness.names import CONFIG_NAME, TUNE_INITIAL_CHECKPOINT

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

SUMMARY_NAME = "summary.json"
CHECKPOINTS_DIR = "checkpoints"
TUNE_DIR = "tune"
TUNE_EXPERIMENT = "experiment"
STEPS_KEY = "num_env_steps_sampled_lifetime"
ITERATION_SAMPLED_KEY = "env_runners/num_env_steps_sampled"

log = get_logger(__name__)


@dataclass
class RunResult:
    final_metrics: dict[str, Any]
    iterations: int
    checkpoint_path: Path | None
    algorithm_checkpoints: list[Path] = field(default_factory=list)
    wall_time_s: float = 0.0


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


@dataclass
class TuneRunResult:
    """Our summary of a Tune run, and Tune's own `ResultGrid` for anything beyond it."""

    trials: list[TrialRecord]
    experiment_path: Path
    wall_time_s: float = 0.0
    result_grid: Any = None  # ray.tune.ResultGrid


def normalize_stop(stop: Mapping[str, float] | int) -> dict[str, float]:
    """`10` means ten iterations; a mapping is flattened result key -> threshold (>=)."""
    if isinstance(stop, bool) or not isinstance(stop, int | Mapping):
        raise TypeError(f"stop must be an int or a mapping, got {type(stop).__name__}")
    if isinstance(stop, int):
        if stop < 1:
            raise ValueError(f"stop must be at least one iteration, got {stop}")
        return {"training_iteration": stop}
    if not stop:
        raise ValueError("stop must name at least one criterion")
    return dict(stop)


def should_stop(flat_result: Mapping[str, Any], stop: Mapping[str, float]) -> bool:
    return any(
        flat_result.get(key) is not None and flat_result[key] >= threshold
        for key, threshold in stop.items()
    )


def prepare_config(
    config: AlgorithmConfig, context: RunContext, *, apply_plan: bool = True
) -> AlgorithmConfig:
    """A copy with the context's seed and (optionally) its hardware plan; science untouched."""
    config = apply_hardware(config, context.hardware) if apply_plan else config.copy(False)
    config.debugging(seed=context.seed)
    return config


def ensure_ray(context: RunContext) -> None:
    """Connect to the context's cluster, or start a local Ray, once per process (rayinit.py)."""
    from rl_harness.harness.rayinit import start_ray

    start_ray(context.ray_address)


def write_config(context: RunContext, config: AlgorithmConfig, overrides=None) -> dict[str, Any]:
    """results/<run-id>/config.json: the resolved config (configrecord.py); returns it."""
    record = config_record(config, overrides)
    write_json_atomic(context.results_dir / CONFIG_NAME, record)
    return record


def _progress(label: str, stop: Mapping[str, float]) -> Progress:
    iterations = stop.get("training_iteration")
    steps = stop.get(STEPS_KEY)
    return Progress(
        label,
        iteration_target=int(iterations) if iterations else None,
        steps_target=float(steps) if steps and not iterations else None,
        bar=stdout_is_terminal(),
    )


def _steps_before(row: Mapping[str, Any], last: int | None) -> int | None:
    """Lifetime env steps before this row's iteration: the last row's count, else this
    count less the iteration's own samples (a resumed run's first iteration)."""
    if last is not None:
        return last
    steps, sampled = env_steps_of(row), row.get(ITERATION_SAMPLED_KEY)
    if steps is not None and isinstance(sampled, int | float):
        return max(steps - int(sampled), 0)
    return None


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint dir itself, or the newest one under `<dir>/checkpoints/`."""
    path = Path(path).resolve()
    if (path / "rllib_checkpoint.json").exists():
        return path
    folder = path / CHECKPOINTS_DIR if (path / CHECKPOINTS_DIR).is_dir() else path
    candidates = sorted(p for p in folder.glob("iter_*") if (p / "rllib_checkpoint.json").exists())
    if not candidates:
        raise FileNotFoundError(f"no RLlib checkpoint at or under {path}")
    return candidates[-1]


def _save(algo: Algorithm, context: RunContext, iteration: int) -> Path:
    path = context.artifacts_dir / CHECKPOINTS_DIR / f"iter_{iteration:06d}"
    algo.save_to_path(str(path))
    return path


def _write_summary(context: RunContext, record: dict[str, Any]) -> None:
    write_json_atomic(
        context.results_dir / SUMMARY_NAME,
        {"run_id": context.run_id, "seed": context.seed, **record},
    )


def run_algorithm(
    config: AlgorithmConfig,
    context: RunContext,
    *,
    stop: Mapping[str, float] | int,
    checkpoint_every: int = 0,
    checkpoint_schedule: CheckpointSchedule | None = None,
    apply_plan: bool = True,
    on_iteration: Callable[[Algorithm, dict[str, Any]], None] | None = None,
) -> RunResult:
    """Build the algorithm and train it until `stop`, recording every iteration.

    `checkpoint_every=k` saves every k iterations; `checkpoint_schedule` (a
    `CheckpointSchedule`) adds step 0 and log-spaced checkpoints. A final checkpoint is saved
    once training has started, also when the run is interrupted (SIGTERM/SIGINT take effect
    between iterations, see interrupts.py). Each checkpoint gets a row in
    results/<run-id>/checkpoints.jsonl. With `context.resume_from`, training continues from
    that checkpoint (its iteration count and weights).
    """
    stop = normalize_stop(stop)
    schedule = as_schedule(checkpoint_every, checkpoint_schedule)
    config = prepare_config(config, context, apply_plan=apply_plan)
    record = write_config(context, config)
    ensure_ray(context)
    started = time.perf_counter()
    metrics = MetricsLog(context.results_dir / METRICS_NAME)
    # --log-to: off unless asked, never fails the run; the config goes in as params
    mirrors = open_mirrors(context, params=flat_config(record))
    saved = CheckpointLog(context.results_dir, context.artifacts_dir)
    progress = _progress(context.run_id, stop)
    algo: Algorithm | None = None
    checkpoints: list[Path] = []
    row: dict[str, Any] = {}
    status = RUNNING
    interrupts.forget_outside_a_run()
    try:
        algo = config.build_algo()
        if context.resume_from is not None:
            checkpoint = _restore(algo, context.resume_from)
            log.info(f"[{context.run_id}] resumed from {checkpoint} at iteration {algo.iteration}")
        elif schedule.at_start:
            checkpoints.append(_save(algo, context, 0))
            saved.append(checkpoints[-1], iteration=0, env_steps=0, reasons=["start"])
        last_steps: int | None = None if context.resume_from is not None else 0
        while not should_stop({"training_iteration": algo.iteration}, stop):
            # A stop signal lands between iterations: checkpoints hold whole iterations.
            with interrupts.deferred():
                before = algo.iteration
                result = algo.train()
                row = compact_metrics(result)
                metrics.append(row)
                mirrors.log(row)
                log.info(progress.line(row))
                if on_iteration is not None:
                    on_iteration(algo, result)
                steps = env_steps_of(row)
                reasons = schedule.reasons(
                    algo.iteration,
                    steps,
                    previous_iteration=before,
                    previous_env_steps=_steps_before(row, last_steps),
                )
                last_steps = steps
                if reasons:
                    checkpoints.append(_save(algo, context, algo.iteration))
                    saved.append(
                        checkpoints[-1], iteration=algo.iteration, env_steps=steps, reasons=reasons
                    )
            if should_stop(flatten(result), stop):
                break
        status = COMPLETED
    except (RunInterrupted, KeyboardInterrupt, SystemExit):
        status = INTERRUPTED
        raise
    except Exception:
        status = FAILED
        raise
    finally:
        mirrors.close(status)
        with interrupts.held():  # a second signal must not cut the final save short
            _finish_direct(context, algo, status, checkpoints, row, stop, started, saved)
    iterations = algo.iteration
    return RunResult(
        row, iterations, checkpoints[-1] if checkpoints else None, checkpoints, _elapsed(started)
    )


def _restore(algo: Algorithm, resume_from: Path | str) -> Path | str:
    """Restore a checkpoint: a local one (or the newest under a folder), or a URI as is."""
    if is_uri(str(resume_from)):
        algo.restore_from_path(str(resume_from))  # pyarrow picks the filesystem from the URI
        return str(resume_from)
    checkpoint = resolve_checkpoint(Path(resume_from))
    algo.restore_from_path(str(checkpoint))
    return checkpoint


def _elapsed(started: float) -> float:
    return time.perf_counter() - started


def _finish_direct(
    context: RunContext,
    algo: Algorithm | None,
    status: str,
    checkpoints: list[Path],
    row: dict[str, Any],
    stop: Mapping[str, float],
    started: float,
    saved: CheckpointLog,
) -> None:
    """Final checkpoint (once training started, unless it failed), summary, stop the algo."""
    trained = algo is not None and algo.iteration > 0
    if (
        trained
        and status != FAILED
        and (not checkpoints or checkpoints[-1].name != _iter_name(algo))
    ):
        checkpoints.append(_save(algo, context, algo.iteration))
        saved.append(
            checkpoints[-1],
            iteration=algo.iteration,
            env_steps=env_steps_of(row),
            reasons=["final"],
        )
    _write_summary(
        context,
        {
            "runner": "direct",
            "status": status,
            "iterations": algo.iteration if algo is not None else 0,
            "final_metrics": row,
            "checkpoints": [str(p) for p in checkpoints],
            "final_checkpoint": str(checkpoints[-1]) if checkpoints else None,
            "resumed_from": location_text(context.resume_from),
            "stop": stop,
            "wall_time_s": round(_elapsed(started), 3),
        },
    )
    if algo is not None:
        algo.stop()


def _iter_name(algo: Algorithm) -> str:
    return f"iter_{algo.iteration:06d}"


def _trial_seed(trial_config: Mapping[str, Any]) -> int | None:
    seed = trial_config.get("seed")
    return int(seed) if isinstance(seed, int) else None


# The run that Tune's metrics callback records into. Tune pickles the callback with its
# experiment and Tuner.restore brings that copy back, so the callback binds to the live run
# in setup() instead of keeping the run it was made for: a resumed sweep's rows belong to
# the resuming run's records, never to the interrupted run's.
_live_tune_run: dict[str, Any] = {}


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
    chain = list(existing) if isinstance(existing, list | tuple) else [existing] if existing else []
    config = config.copy(copy_frozen=False)
    config.callbacks(on_algorithm_init=[*chain, _save_initial_checkpoint])
    return config


def _metrics_callback(
    context: RunContext,
    target: int | None,
    *,
    stop: Mapping[str, float],
    schedule: CheckpointSchedule,
    config: AlgorithmConfig,
    storage_fs: Any,
):
    from ray import tune
    from ray.tune.result import SHOULD_CHECKPOINT

    _live_tune_run.update(
        context=context,
        target=target,
        stop=stop,
        schedule=schedule,
        config=config,
        storage_fs=storage_fs,
    )

    class HarnessMetricsCallback(tune.Callback):
        """Runs in the driver: one compact row per trial result, tagged with trial id and seed.

        Also notes which trials Tune completed: a trial stopped by its criterion, a stopper
        or a scheduler completes; one cut short by Ctrl-C never does. After SIGTERM/SIGINT
        (interrupts.py) it asks Tune for a checkpoint at each running trial's next result
        (results may be changed in place here) and stops Tune once every one is saved.
        """

        def __init__(self) -> None:
            self._bind()

        def _bind(self) -> None:
            # Through the module, not a global: Tune's copy of this (local) class is pickled
            # by value, together with a snapshot of the globals it names.
            from rl_harness.harness import runners

            live = runners._live_tune_run
            self.context: RunContext = live["context"]
            self.target: int | None = live["target"]
            self.stop: Mapping[str, float] = live["stop"]
            self.schedule: CheckpointSchedule = live["schedule"]
            self.config: AlgorithmConfig = live["config"]
            self.storage_fs: Any = live["storage_fs"]
            self.log = MetricsLog(self.context.results_dir / METRICS_NAME)
            self.checkpoint_log = CheckpointLog(
                self.context.results_dir, self.context.artifacts_dir
            )
            self.completed: set[str] = set()
            self.mirrors: dict[str, Mirrors] = {}  # --log-to, one per trial, opened lazily
            self.saved: set[str] = set()
            self.progress: dict[str, Progress] = {}
            self.last_steps: dict[str, int | None] = {}  # per trial, for log-spaced saves
            self.reasons: dict[str, list[str]] = {}  # per trial: why its next save happens

        def setup(self, **info) -> None:
            self._bind()
            interrupts.take_over_tune_sigint()

        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            interrupts.tune_result_seen()
            trial_id = trial.trial_id
            seed = _trial_seed(trial.config)
            row = {"trial_id": trial_id, "seed": seed}
            row.update(compact_metrics(result))
            self.log.append(row)
            label = f"{self.context.run_id}/{trial_id}"
            if self.context.log_to:
                if trial_id not in self.mirrors:
                    params = flat_config(trial_config_record(self.config, trial.config))
                    self.mirrors[trial_id] = open_mirrors(self.context, label, seed, params)
                self.mirrors[trial_id].log(row)
            if trial_id not in self.progress:
                self.progress[trial_id] = _progress(label, self.stop)
                self._note_initial_checkpoint(trial, seed)
            log.info(self.progress[trial_id].line(row))
            iteration_now = int(row.get("training_iteration") or 0)
            steps = env_steps_of(row)
            reasons = self.schedule.reasons(
                iteration_now,
                steps,
                previous_iteration=iteration_now - 1,
                previous_env_steps=_steps_before(row, self.last_steps.get(trial_id)),
            )
            self.last_steps[trial_id] = steps
            self.reasons[trial_id] = reasons
            if "log" in reasons:
                result[SHOULD_CHECKPOINT] = True  # Tune's checkpoint_frequency does "every"
            if interrupts.stop_requested() is not None:
                result[SHOULD_CHECKPOINT] = True

        def _note_initial_checkpoint(self, trial, seed: int | None) -> None:
            """Step 0's checkpoint (saved in the trial at its start): its checkpoints.jsonl row."""
            from rl_harness.harness.storage import tune_storage as remote

            if not self.schedule.at_start or trial.path is None:
                return
            path = f"{trial.path}/{TUNE_INITIAL_CHECKPOINT}"
            if self.storage_fs is None and not (Path(path) / "rllib_checkpoint.json").is_file():
                return  # not saved (a restored trial keeps its row in the first run's records)
            self.checkpoint_log.append(
                remote.as_uri(path, self.storage_fs),
                iteration=0,
                env_steps=0,
                reasons=["start"],
                trial_id=trial.trial_id,
                seed=seed,
            )

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info) -> None:
            from rl_harness.harness.storage import tune_storage as remote

            last = trial.last_result or {}
            reasons = self.reasons.pop(trial.trial_id, None) or ["final"]
            if interrupts.stop_requested() is not None and reasons == ["final"]:
                reasons = ["interrupt"]
            self.checkpoint_log.append(
                remote.as_uri(checkpoint.path, self.storage_fs),
                iteration=int(last.get("training_iteration") or 0),
                env_steps=env_steps_of(last),
                reasons=reasons,
                trial_id=trial.trial_id,
                seed=_trial_seed(trial.config),
            )
            if interrupts.stop_requested() is not None:
                self.saved.add(trial.trial_id)
                self._stop_when_saved(trials)

        def on_trial_complete(self, iteration, trials, trial, **info) -> None:
            self.completed.add(trial.trial_id)
            self._close(trial.trial_id, COMPLETED)
            if interrupts.stop_requested() is not None:
                self._stop_when_saved(trials)

        def on_trial_error(self, iteration, trials, trial, **info) -> None:
            self._close(trial.trial_id, FAILED)

        def on_experiment_end(self, trials, **info) -> None:
            for trial_id in list(self.mirrors):
                self._close(trial_id, INTERRUPTED)

        def _close(self, trial_id: str, status: str) -> None:
            mirrors = self.mirrors.pop(trial_id, None)
            if mirrors is not None:
                mirrors.close(status)

        def _stop_when_saved(self, trials) -> None:
            running = {t.trial_id for t in trials if t.status == "RUNNING"}
            if running <= self.saved:
                interrupts.stop_tune()

    return HarnessMetricsCallback()


def _stopper(stop: dict[str, float], stopper: Any):
    """Tune's stop argument: our criteria, or-ed with the caller's stopper if any."""
    if stopper is None:
        return stop
    from ray import tune

    class StopCriteriaOrStopper(tune.Stopper):
        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return should_stop(flatten(result), stop) or bool(stopper(trial_id, result))

        def stop_all(self) -> bool:
            return bool(stopper.stop_all()) if isinstance(stopper, tune.Stopper) else False

    return StopCriteriaOrStopper()


def _fit_keeping_signal_handlers(tuner):
    """`tuner.fit()`, then put back the SIGINT/SIGUSR1 handlers Tune leaves installed.

    Without this, after one Tune run every later Ctrl-C in the process is swallowed. During
    the fit, SIGTERM asks Tune to stop gracefully, as Ctrl-C does (interrupts.tune_mode).
    """
    names = ("SIGINT", "SIGUSR1")
    signums = [getattr(signal, name) for name in names if hasattr(signal, name)]
    in_main = threading.current_thread() is threading.main_thread()
    saved = {signum: signal.getsignal(signum) for signum in signums} if in_main else {}
    try:
        with interrupts.tune_mode():
            return tuner.fit()
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


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
    from ray import tune

    from rl_harness.harness.storage import tune_storage as remote

    stop = normalize_stop(stop)
    schedule = as_schedule(checkpoint_every, checkpoint_schedule)
    config = prepare_config(config, context, apply_plan=apply_plan)
    if schedule.at_start:
        config = _with_initial_checkpoint(config)
    ensure_ray(context)
    space: dict[str, Any] = dict(param_space or {})
    if seeds is not None:
        if not seeds:
            raise ValueError("seeds must not be empty")
        space["seed"] = tune.grid_search([int(s) for s in seeds])
    write_config(context, config, space)
    config_dict = config.to_dict()
    config_dict.update(space)
    target = int(stop["training_iteration"]) if "training_iteration" in stop else None
    storage_path, storage_fs, _ = remote.tune_storage(
        tune_storage,  # type: ignore[arg-type]
        results_dir=context.results_dir,
        experiment_dir=context.experiment_dir,
        artifacts_dir=context.artifacts_dir,
        run_id=context.run_id,
        local_dir=str(context.artifacts_dir / TUNE_DIR),
    )
    callback = _metrics_callback(
        context, target, stop=stop, schedule=schedule, config=config, storage_fs=storage_fs
    )
    run_config = tune.RunConfig(
        name=TUNE_EXPERIMENT,
        storage_path=storage_path,
        storage_filesystem=storage_fs,
        stop=_stopper(stop, stopper),
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
    started = time.perf_counter()
    if context.resume_from is not None:
        uri = remote.remote_uri(context.resume_from)
        if uri is not None:  # an experiment on the bucket: restore it there
            experiment, storage_fs = remote.bucket_filesystem_for(uri)
        else:
            experiment, storage_fs = str(Path(context.resume_from).resolve()), None
        _live_tune_run["storage_fs"] = storage_fs  # where the restored trials save
        if not tune.Tuner.can_restore(experiment, storage_filesystem=storage_fs):
            raise FileNotFoundError(f"no restorable Tune experiment at {uri or experiment}")
        log.info(f"[{context.run_id}] restoring Tune experiment {uri or experiment}")
        tuner = tune.Tuner.restore(
            experiment,
            trainable=config.algo_class,
            resume_errored=True,
            storage_filesystem=storage_fs,
        )
    else:
        tuner = tune.Tuner(
            config.algo_class,
            param_space=config_dict,
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
    grid = _fit_keeping_signal_handlers(tuner)
    # Tune turns Ctrl-C into a graceful stop and returns normally (trials even count as
    # terminated): a trial that ended without error and that Tune never completed tells
    # (a restored experiment's callback is Tune's copy: there, one short of its criterion).
    restored = context.resume_from is not None
    cut_short = {
        (result.metrics or {}).get("trial_id")
        for result in grid
        if not result.error
        and (
            not should_stop(flatten(result.metrics or {}), stop)
            if restored
            else (result.metrics or {}).get("trial_id") not in callback.completed
        )
    }
    interrupted = bool(cut_short)
    trials = []
    configs: dict[str, dict[str, Any]] = {}
    for result in grid:
        metrics = compact_metrics(result.metrics or {})
        configs[str((result.metrics or {}).get("trial_id"))] = trial_config_record(
            config, result.config or {}
        )
        trials.append(
            TrialRecord(
                trial_id=str((result.metrics or {}).get("trial_id")),
                seed=_trial_seed(result.config or {}),
                status=FAILED
                if result.error
                else INTERRUPTED
                if (result.metrics or {}).get("trial_id") in cut_short
                else COMPLETED,
                iterations=int(metrics.get("training_iteration") or 0),
                final_metrics=metrics,
                checkpoint_path=Path(result.checkpoint.path) if result.checkpoint else None,
                checkpoints=sorted(Path(c.path) for c, _ in result.best_checkpoints or []),
                best_checkpoint=_best_checkpoint(
                    result, checkpoint_score_attribute, checkpoint_score_order
                ),
            )
        )
    wall = time.perf_counter() - started
    experiment_path = Path(grid.experiment_path)
    _write_summary(
        context,
        {
            "runner": "tune",
            "status": INTERRUPTED
            if interrupted
            else FAILED
            if any(t.status == FAILED for t in trials)
            else COMPLETED,
            "experiment_path": remote.as_uri(str(experiment_path), storage_fs),
            "resumed_from": location_text(context.resume_from),
            "stop": stop,
            "checkpoint_score_attribute": checkpoint_score_attribute,
            "trials": [
                {
                    "trial_id": t.trial_id,
                    "seed": t.seed,
                    "status": t.status,
                    "iterations": t.iterations,
                    "final_metrics": t.final_metrics,
                    "checkpoint": remote.as_uri(str(t.checkpoint_path), storage_fs)
                    if t.checkpoint_path
                    else None,
                    "checkpoints": [remote.as_uri(str(p), storage_fs) for p in t.checkpoints],
                    "best_checkpoint": remote.as_uri(str(t.best_checkpoint), storage_fs)
                    if t.best_checkpoint
                    else None,
                    "config": configs.get(t.trial_id),
                }
                for t in trials
            ],
            "wall_time_s": round(wall, 3),
        },
    )
    if interrupted:
        signum = interrupts.stop_requested() or signal.SIGINT
        log.info(
            f"[{context.run_id}] Tune run stopped early; continue it with "
            f"--resume-from {remote.as_uri(str(experiment_path), storage_fs)}"
        )
        raise RunInterrupted(signum)
    errors = [result.error for result in grid if result.error]
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(trials)} Tune trials failed: {errors[0]}")
    return TuneRunResult(trials, experiment_path, wall, grid)


def _best_checkpoint(result: Any, attribute: str | None, order: str) -> Path | None:
    if attribute is None or not result.best_checkpoints:
        return None
    try:
        best = result.get_best_checkpoint(attribute, order)
    except (KeyError, RuntimeError, ValueError):  # the attribute was never reported
        return None
    return Path(best.path) if best is not None else None

"""The direct runner: an `algo.train()` loop owned by the harness."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rl_harness.harness import interrupts
from rl_harness.harness.checkpointing import (
    CheckpointLog,
    CheckpointSchedule,
    as_schedule,
    env_steps_of,
)
from rl_harness.harness.configrecord import flat_config
from rl_harness.harness.console import get_logger
from rl_harness.harness.context import RunContext
from rl_harness.harness.interrupts import COMPLETED, FAILED, INTERRUPTED, RUNNING, RunInterrupted
from rl_harness.harness.layout import checkpoint_name, resolve_checkpoint
from rl_harness.harness.locations import Location, is_uri, location_text
from rl_harness.harness.metric_keys import ITERATION_KEY
from rl_harness.harness.metrics import MetricsLog, compact_metrics, flatten
from rl_harness.harness.mirrors import open_mirrors
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

log = get_logger(__package__)  # both runners log as rl_harness.harness.runners


@dataclass
class RunResult:
    final_metrics: dict[str, Any]
    iterations: int
    checkpoint_path: Path | None
    algorithm_checkpoints: list[Path] = field(default_factory=list)
    wall_time_s: float = 0.0


@dataclass(frozen=True)
class DirectSummary:
    """summary.json of a direct run; checkpoint paths relative to artifacts/<run-id>/."""

    status: str
    iterations: int
    final_metrics: dict[str, Any]
    checkpoints: list[str]
    final_checkpoint: str | None
    resumed_from: str | None
    stop: dict[str, float]
    wall_time_s: float
    runner: str = "direct"


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
    preflight(config, context, checkpoint=True)  # bad input fails here, before Ray starts
    ensure_ray(context)
    started = time.perf_counter()
    metrics = MetricsLog(context.paths.metrics)
    # --log-to: off unless asked, never fails the run; the config goes in as params
    mirrors = open_mirrors(context, params=flat_config(record))
    saved = CheckpointLog(context.paths)
    line = progress(context.run_id, stop)
    algo: Algorithm | None = None
    checkpoints: list[Path] = []
    row: dict[str, Any] = {}
    status = RUNNING
    interrupts.forget_outside_a_run()
    try:
        log.info(f"[{context.run_id}] building the algorithm (env runners, learner)")
        algo = config.build_algo()
        if context.resume_from is not None:
            checkpoint = _restore(algo, context.resume_from)
            log.info(f"[{context.run_id}] resumed from {checkpoint} at iteration {algo.iteration}")
        elif schedule.at_start:
            checkpoints.append(_save(algo, context))
            saved.append(checkpoints[-1], iteration=0, env_steps=0, reasons=["start"])
        last_steps: int | None = None if context.resume_from is not None else 0
        while not should_stop({ITERATION_KEY: algo.iteration}, stop):
            # A stop signal lands between iterations: checkpoints hold whole iterations.
            with interrupts.deferred():
                before = algo.iteration
                result = algo.train()
                row = compact_metrics(result)
                metrics.append(row)
                mirrors.log(row)
                log.info(line.line(row))
                if on_iteration is not None:
                    on_iteration(algo, result)
                steps = env_steps_of(row)
                reasons = schedule.reasons(
                    algo.iteration,
                    steps,
                    previous_iteration=before,
                    previous_env_steps=steps_before(row, last_steps),
                )
                last_steps = steps
                if reasons:
                    checkpoints.append(_save(algo, context))
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
            _finish(context, algo, status, checkpoints, row, stop, started, saved)
    iterations = algo.iteration
    return RunResult(
        row, iterations, checkpoints[-1] if checkpoints else None, checkpoints, _elapsed(started)
    )


def _save(algo: Algorithm, context: RunContext) -> Path:
    path = context.paths.checkpoint(algo.iteration)
    algo.save_to_path(str(path))
    return path


def _restore(algo: Algorithm, resume_from: Location) -> Location:
    """Restore a checkpoint: a local one (or the newest under a folder), or a URI as is."""
    if is_uri(str(resume_from)):
        algo.restore_from_path(str(resume_from))  # pyarrow picks the filesystem from the URI
        return str(resume_from)
    checkpoint = resolve_checkpoint(Path(resume_from))
    algo.restore_from_path(str(checkpoint))
    return checkpoint


def _elapsed(started: float) -> float:
    return time.perf_counter() - started


def _finish(
    context: RunContext,
    algo: Algorithm | None,
    status: str,
    checkpoints: list[Path],
    row: dict[str, Any],
    stop: dict[str, float],
    started: float,
    saved: CheckpointLog,
) -> None:
    """Final checkpoint (once training started, unless it failed), summary, stop the algo."""
    if (
        algo is not None
        and algo.iteration > 0  # training started
        and status != FAILED
        and (not checkpoints or checkpoints[-1].name != checkpoint_name(algo.iteration))
    ):
        checkpoints.append(_save(algo, context))
        saved.append(
            checkpoints[-1],
            iteration=algo.iteration,
            env_steps=env_steps_of(row),
            reasons=["final"],
        )
    recorded = [context.paths.record(path) for path in checkpoints]
    summary = DirectSummary(
        status=status,
        iterations=algo.iteration if algo is not None else 0,
        final_metrics=row,
        checkpoints=recorded,
        final_checkpoint=recorded[-1] if recorded else None,
        resumed_from=location_text(context.resume_from),
        stop=stop,
        wall_time_s=round(_elapsed(started), 3),
    )
    write_summary(context, summary)
    if algo is not None:
        algo.stop()

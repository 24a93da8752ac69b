"""What both runners share: stop criteria, the seeded config, config.json, progress lines,
and summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rl_harness.harness.atomic import write_json_atomic
from rl_harness.harness.checkpointing import env_steps_of
from rl_harness.harness.configrecord import config_record
from rl_harness.harness.console import Progress, stdout_is_terminal
from rl_harness.harness.context import RunContext
from rl_harness.harness.hardware import apply_hardware
from rl_harness.harness.locations import is_uri
from rl_harness.harness.metric_keys import ENV_STEPS_KEY, ITERATION_ENV_STEPS_KEY, ITERATION_KEY
from rl_harness.harness.preflight import check_buildable, check_checkpoint

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig


def normalize_stop(stop: Mapping[str, float] | int) -> dict[str, float]:
    """`10` means ten iterations; a mapping is flattened result key -> threshold (>=)."""
    if isinstance(stop, bool) or not isinstance(stop, int | Mapping):
        raise TypeError(f"stop must be an int or a mapping, got {type(stop).__name__}")
    if isinstance(stop, int):
        if stop < 1:
            raise ValueError(f"stop must be at least one iteration, got {stop}")
        return {ITERATION_KEY: stop}
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


def preflight(config: AlgorithmConfig, context: RunContext, *, checkpoint: bool) -> None:
    """Before Ray starts: the env and RLModule build from `config` in the driver, and with
    `checkpoint`, a local `--resume-from` checkpoint is readable and fits them
    (preflight.py; PreflightError naming the key or path)."""
    built = check_buildable(config)
    resume = context.resume_from
    if checkpoint and resume is not None and not is_uri(str(resume)):
        check_checkpoint(Path(resume), config, built)


def ensure_ray(context: RunContext) -> None:
    """Connect to the context's cluster, or start a local Ray, once per process (rayinit.py)."""
    from rl_harness.harness.rayinit import start_ray

    start_ray(context.ray_address)


def write_config(
    context: RunContext, config: AlgorithmConfig, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """results/<run-id>/config.json: the resolved config (configrecord.py); returns it."""
    record = config_record(config, overrides)
    # The recipe's budget beside the config it built from it (group-by `budget.name`).
    record["budget"] = context.budget_record
    write_json_atomic(context.paths.config, record)
    return record


def progress(label: str, stop: Mapping[str, float]) -> Progress:
    """The progress line of a run or trial: toward its iteration or env-step target."""
    iterations = stop.get(ITERATION_KEY)
    steps = stop.get(ENV_STEPS_KEY)
    return Progress(
        label,
        iteration_target=int(iterations) if iterations else None,
        steps_target=float(steps) if steps and not iterations else None,
        bar=stdout_is_terminal(),
    )


def steps_before(row: Mapping[str, Any], last: int | None) -> int | None:
    """Lifetime env steps before this row's iteration: the last row's count, else this
    count less the iteration's own samples (a resumed run's first iteration)."""
    if last is not None:
        return last
    steps, sampled = env_steps_of(row), row.get(ITERATION_ENV_STEPS_KEY)
    if steps is not None and isinstance(sampled, int | float):
        return max(steps - int(sampled), 0)
    return None


def write_summary(context: RunContext, summary: Any) -> None:
    """results/<run-id>/summary.json from a runner's summary dataclass, with run id and seed."""
    write_json_atomic(
        context.paths.summary, {"run_id": context.run_id, "seed": context.seed, **asdict(summary)}
    )

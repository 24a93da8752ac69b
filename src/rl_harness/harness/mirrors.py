"""Optional mirrors of metrics.jsonl rows where researchers already look (`--log-to`).

metrics.jsonl stays the record; a mirror only copies each row's finite numbers, at step
`training_iteration`, through the project's own client library, imported when first used:

- "tensorboard": torch's `SummaryWriter` (needs the tensorboard extra), under
  artifacts/<run-id>/tensorboard/<name> (`tensorboard --logdir <leaf>/artifacts`);
- "mlflow": an MLflow run (experiment = the experiment module, run name = <name>) in
  $MLFLOW_TRACKING_URI, else `sqlite:///<leaf artifacts>/mlflow.db` (MLflow's own default
  kind of store; `mlflow ui --backend-store-uri` it);
- "wandb": an offline W&B run under artifacts/<run-id>/wandb (`wandb sync` it later).

<name> is the run id, or run-id/trial-id for a Tune trial. The run's config (config.json,
dotted keys; a Tune trial's own) goes in as the tracker's parameters: TensorBoard hparams,
MLflow params, the W&B run config. A target whose package is not installed is refused with
the other options, before the recipe is imported (one line, exit code 2; no run folder). A
mirror that fails later (bad URI, full disk) logs one warning line and turns itself off: it
never fails a run.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rl_harness.harness.console import get_logger
from rl_harness.harness.metric_keys import ITERATION_KEY

if TYPE_CHECKING:
    from rl_harness.harness.context import RunContext

LOG_TARGETS = ("tensorboard", "mlflow", "wandb")
MLFLOW_PARAM_VALUE_LIMIT = 6000  # characters: MLflow's limit for a param value
MLFLOW_PARAMS_PER_BATCH = 100
PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}  # per target
log = get_logger(__name__)

Params = dict[str, Any]  # dotted config key -> str, int, float, bool or None


def param_value(value: Any) -> str | int | float | bool:
    """A config value as a tracker parameter: numbers and bools kept, anything else text."""
    if isinstance(value, bool | int | float) and not (
        isinstance(value, float) and not math.isfinite(value)
    ):
        return value
    return "None" if value is None else value if isinstance(value, str) else json.dumps(value)


def _installed(package: str) -> bool:
    """The package can be imported here (found, not imported: no start-up cost)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def check_log_targets(targets: Sequence[str]) -> tuple[str, ...]:
    """The targets, deduplicated in order; an unknown one, or one whose package is not
    installed, is a ValueError naming it."""
    if isinstance(targets, str):
        raise ValueError(f"log_to takes a sequence of names, e.g. ('wandb',), got {targets!r}")
    unknown = [t for t in targets if t not in LOG_TARGETS]
    if unknown:
        raise ValueError(f"unknown --log-to {unknown[0]!r}; choose from {', '.join(LOG_TARGETS)}")
    for target in dict.fromkeys(targets):
        if not _installed(PACKAGES[target]):
            raise ValueError(
                f"--log-to {target} needs the {PACKAGES[target]} package, which is not "
                f"installed in this environment (uv add {PACKAGES[target]})"
            )
    return tuple(dict.fromkeys(targets))


def numeric_values(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's finite numbers (ids, seeds as strings, None and NaN are left out)."""
    return {
        key: float(value)
        for key, value in row.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }


class Mirror(Protocol):
    def log_params(self, params: Params) -> None: ...

    def log(self, values: dict[str, float], step: int) -> None: ...

    def close(self, status: str) -> None: ...


class TensorBoardMirror:
    def __init__(self, context: RunContext, name: str) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        self.logdir = context.paths.tensorboard(name)
        self.writer = SummaryWriter(log_dir=str(self.logdir))

    def log_params(self, params: Params) -> None:
        from tensorboard.plugins.hparams import summary_v2  # not .api: that imports TF

        # The hparams summary alone, in the run's own event file: TensorBoard's HParams view
        # then takes its metric columns from the run's scalars (add_hparams would write a
        # separate run with only the metrics passed to it).
        hparams = {key: param_value(value) for key, value in params.items()}
        file_writer = self.writer.file_writer
        if file_writer is None:  # SummaryWriter opens it in __init__; close() drops it
            raise RuntimeError(f"the TensorBoard writer of {self.logdir} is closed")
        file_writer.add_summary(summary_v2.hparams_pb(hparams))
        self.writer.flush()

    def log(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self, status: str) -> None:
        self.writer.close()


def mlflow_tracking_uri(context: RunContext) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or (
        f"sqlite:///{context.artifacts_dir.parent / 'mlflow.db'}"
    )


class MLflowMirror:
    STATUS = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}

    def __init__(self, context: RunContext, name: str, seed: int | None) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=mlflow_tracking_uri(context))
        experiment = self.client.get_experiment_by_name(context.experiment_module)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(context.experiment_module)
        )
        tags = {"rl_harness.run_id": context.run_id, "rl_harness.seed": str(seed)}
        self.run_id = self.client.create_run(experiment_id, run_name=name, tags=tags).info.run_id

    def log_params(self, params: Params) -> None:
        from mlflow.entities import Param

        items = [
            Param(key, str(param_value(value))[:MLFLOW_PARAM_VALUE_LIMIT])
            for key, value in sorted(params.items())
        ]
        for start in range(0, len(items), MLFLOW_PARAMS_PER_BATCH):
            self.client.log_batch(
                self.run_id, params=items[start : start + MLFLOW_PARAMS_PER_BATCH]
            )

    def log(self, values: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics = [Metric(key, value, stamp, step) for key, value in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=self.STATUS.get(status, "FINISHED"))


class WandbMirror:
    def __init__(self, context: RunContext, name: str, seed: int | None) -> None:
        import wandb

        self.run = wandb.init(
            mode="offline",
            dir=str(context.artifacts_dir),
            project=context.experiment_module.replace("/", "."),
            name=name,
            group=context.run_id,
            config={"seed": seed, "run_id": context.run_id},
            reinit="create_new",
        )

    def log_params(self, params: Params) -> None:
        values = {key: param_value(value) for key, value in params.items()}
        self.run.config.update(values, allow_val_change=True)

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "completed" else 1)


class Mirrors:
    """The mirrors of one run (or Tune trial); every failure is a warning, never an error."""

    def __init__(
        self, context: RunContext, name: str, seed: int | None, params: Params | None = None
    ) -> None:
        self.name = name
        self.active: dict[str, Mirror] = {}
        for target in context.log_to:
            mirror = self._guard(target, "start", lambda t=target: _open(t, context, name, seed))
            if mirror is not None:
                self.active[target] = mirror
                if params:
                    self._guard(target, "log params", lambda m=mirror: m.log_params(params))
        self._steps = 0

    def _guard(self, target: str, action: str, call: Any) -> Any:
        try:
            return call()
        except Exception as error:  # a mirror must never fail the run
            self.active.pop(target, None)
            log.warning(
                f"[{self.name}] warning: --log-to {target} failed to {action} "
                f"({type(error).__name__}: {error}); metrics.jsonl is unaffected, "
                f"{target} mirroring is off"
            )
            return None

    def log(self, row: Mapping[str, Any]) -> None:
        if not self.active:
            return
        self._steps += 1
        step = row.get(ITERATION_KEY)
        step = int(step) if isinstance(step, int | float) else self._steps
        values = numeric_values(row)
        for target, mirror in list(self.active.items()):
            self._guard(target, "log", lambda m=mirror: m.log(values, step))

    def close(self, status: str) -> None:
        for target, mirror in list(self.active.items()):
            self._guard(target, "close", lambda m=mirror: m.close(status))
        self.active.clear()


def _open(target: str, context: RunContext, name: str, seed: int | None) -> Mirror:
    if target == "tensorboard":
        return TensorBoardMirror(context, name)
    if target == "mlflow":
        return MLflowMirror(context, name, seed)
    if target == "wandb":
        return WandbMirror(context, name, seed)
    raise ValueError(f"unknown --log-to target {target!r}")


def open_mirrors(
    context: RunContext,
    name: str | None = None,
    seed: int | None = None,
    params: Params | None = None,
) -> Mirrors:
    """The mirrors `context.log_to` asks for (none by default), named `name` or the run id,
    with `params` (the run's flattened config) logged as the tracker's parameters."""
    return Mirrors(context, name or context.run_id, context.seed if seed is None else seed, params)

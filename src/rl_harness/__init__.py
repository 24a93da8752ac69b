"""rl-harness: reproducible RL experiment composition on Ray RLlib and Tune.

The public names below load lazily, so `import rl_harness` (and the CLI's --help)
stays fast; RLlib is imported only when a runner is used. The `TYPE_CHECKING` imports
show IDEs and type checkers the same names as `__all__` (tests/test_public_api.py
keeps the three equal).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl_harness.harness.atomic import write_json_atomic as write_json
    from rl_harness.harness.checkpointing import CheckpointSchedule
    from rl_harness.harness.console import configure_logging
    from rl_harness.harness.context import RunContext, make_context
    from rl_harness.harness.hardware import HardwarePlan, apply_hardware
    from rl_harness.harness.lifecycle import TrainedRun, train
    from rl_harness.harness.manifest import load_manifest
    from rl_harness.harness.metric_keys import (
        ENV_STEPS_KEY,
        ITERATION_KEY,
        LENGTH_KEY,
        RETURN_KEY,
        learner_key,
    )
    from rl_harness.harness.recipe import Recipe
    from rl_harness.harness.results import Metric, MetricNotFound, Results, read_results
    from rl_harness.harness.runners import RunResult, TuneRunResult, run_algorithm, run_tune

# Public name -> (module, attribute in that module).
_EXPORTS = {
    # What a leaf declares once, as RECIPE = Recipe(run=run, budgets=..., default=..., headline=...)
    "Recipe": ("rl_harness.harness.recipe", "Recipe"),
    "RunContext": ("rl_harness.harness.context", "RunContext"),
    # A run's headline numbers, named once (result.json), and reading them back by name.
    "Results": ("rl_harness.harness.results", "Results"),
    "Metric": ("rl_harness.harness.results", "Metric"),
    "MetricNotFound": ("rl_harness.harness.results", "MetricNotFound"),
    "read_results": ("rl_harness.harness.results", "read_results"),
    "make_context": ("rl_harness.harness.context", "make_context"),
    # A recipe run from a notebook or script, recorded exactly as `rl-harness TARGET` does.
    "train": ("rl_harness.harness.lifecycle", "train"),
    "TrainedRun": ("rl_harness.harness.lifecycle", "TrainedRun"),
    "HardwarePlan": ("rl_harness.harness.hardware", "HardwarePlan"),
    "apply_hardware": ("rl_harness.harness.hardware", "apply_hardware"),
    "run_algorithm": ("rl_harness.harness.runners", "run_algorithm"),
    "run_tune": ("rl_harness.harness.runners", "run_tune"),
    "RunResult": ("rl_harness.harness.runners", "RunResult"),
    "TuneRunResult": ("rl_harness.harness.runners", "TuneRunResult"),
    # When runners save checkpoints: step 0, every N iterations, log-spaced.
    "CheckpointSchedule": ("rl_harness.harness.checkpointing", "CheckpointSchedule"),
    # Show the library's log lines (progress, status) in a notebook or script.
    "configure_logging": ("rl_harness.harness.console", "configure_logging"),
    # Pretty, key-sorted JSON written atomically (a reader never sees half a file).
    "write_json": ("rl_harness.harness.atomic", "write_json_atomic"),
    # A results folder's run manifest (as written: redacted), None when it has none.
    "load_manifest": ("rl_harness.harness.manifest", "load_manifest"),
    # RLlib's metric keys as metrics.jsonl rows and final_metrics hold them.
    "RETURN_KEY": ("rl_harness.harness.metric_keys", "RETURN_KEY"),
    "LENGTH_KEY": ("rl_harness.harness.metric_keys", "LENGTH_KEY"),
    "ENV_STEPS_KEY": ("rl_harness.harness.metric_keys", "ENV_STEPS_KEY"),
    "ITERATION_KEY": ("rl_harness.harness.metric_keys", "ITERATION_KEY"),
    "learner_key": ("rl_harness.harness.metric_keys", "learner_key"),
}
__all__ = [
    "CheckpointSchedule",
    "ENV_STEPS_KEY",
    "HardwarePlan",
    "ITERATION_KEY",
    "LENGTH_KEY",
    "Metric",
    "MetricNotFound",
    "RETURN_KEY",
    "Recipe",
    "Results",
    "RunContext",
    "RunResult",
    "TrainedRun",
    "TuneRunResult",
    "apply_hardware",
    "configure_logging",
    "learner_key",
    "load_manifest",
    "make_context",
    "read_results",
    "run_algorithm",
    "run_tune",
    "train",
    "write_json",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rl_harness' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    return getattr(importlib.import_module(module), attribute)

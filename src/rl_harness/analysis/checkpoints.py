"""Load a trained agent from an RLlib 2.60 algorithm checkpoint: whole, or just its module.

Layout of a checkpoint written by `Algorithm.save_to_path` (new API stack):

    <checkpoint>/rllib_checkpoint.json, algorithm_state.pkl, ...
    <checkpoint>/env_runner/...
    <checkpoint>/learner_group/learner/rl_module/<module_id>/   <- one RLModule checkpoint

Module-only loading restores that RLModule (class, constructor args and weights) without
building env runners, learners or Ray: the cheap path for analysis.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rl_harness.harness.console import LOGGER_NAME
from rl_harness.harness.layout import is_checkpoint, resolve_checkpoint
from rl_harness.harness.metric_keys import ENV_STEPS_KEY, ITERATION_KEY
from rl_harness.harness.metrics import read_metrics

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.core.rl_module.rl_module import RLModule

    from rl_harness.analysis.run_artifacts import RunArtifacts

DEFAULT_MODULE_ID = "default_policy"  # ray.rllib.core.DEFAULT_MODULE_ID
MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module"
RLLIB_DEPRECATION_LOGGER = "ray._common.deprecation"  # RLlib's deprecation_warning() logs here


def module_ids(checkpoint: Path) -> list[str]:
    """The module ids stored in an algorithm checkpoint (or a folder of them)."""
    folder = resolve_checkpoint(checkpoint) / MODULE_SUBDIR
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint has no {MODULE_SUBDIR} folder: {folder.parent}")
    return sorted(p.name for p in folder.iterdir() if (p / "module_state.pkl").exists())


def module_checkpoint_dir(checkpoint: Path, module_id: str = DEFAULT_MODULE_ID) -> Path:
    """The RLModule checkpoint of `module_id` inside an algorithm checkpoint.

    `checkpoint` may be the checkpoint itself or a folder holding `checkpoints/iter_*`
    (the newest is used).
    """
    path = resolve_checkpoint(checkpoint) / MODULE_SUBDIR / module_id
    if not (path / "module_state.pkl").exists():
        raise FileNotFoundError(
            f"no module {module_id!r} in checkpoint {resolve_checkpoint(checkpoint)}; "
            f"it holds {module_ids(checkpoint)}"
        )
    return path


def load_module(checkpoint: Path, module_id: str = DEFAULT_MODULE_ID) -> RLModule:
    """Just the trained RLModule (weights restored, eval mode), without env runners or Ray.

    The module's class must be importable here (e.g. a recipe's module class: install the
    experiment package).
    """
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule

    path = module_checkpoint_dir(checkpoint, module_id)
    with _rllib_deprecations_quiet():
        module = RLModule.from_checkpoint(path)
    if not isinstance(module, torch.nn.Module):  # eval() is torch's
        raise TypeError(f"{path} holds a {type(module).__name__}, not a torch RLModule")
    module.eval()
    return module


@contextmanager
def _rllib_deprecations_quiet() -> Iterator[None]:
    """RLlib's own DeprecationWarning lines (RLlib calling RLlib, e.g. `RLModule(config=...)`
    while restoring) stay off the console unless the library's logger shows debug lines."""
    deprecations = logging.getLogger(RLLIB_DEPRECATION_LOGGER)
    if logging.getLogger(LOGGER_NAME).isEnabledFor(logging.DEBUG):
        yield
        return
    level = deprecations.level
    deprecations.setLevel(logging.ERROR)
    try:
        yield
    finally:
        deprecations.setLevel(level)


def load_algorithm(checkpoint: Path) -> Algorithm:
    """The full Algorithm (env runners, learners) restored from `checkpoint`.

    Needs Ray (it starts a local one if none is running); call `.stop()` when done.
    """
    from ray.rllib.algorithms.algorithm import Algorithm

    return Algorithm.from_checkpoint(str(resolve_checkpoint(checkpoint)))


@dataclass(frozen=True)
class RunCheckpoint:
    """One saved checkpoint of a run: when (iteration, lifetime env steps) and where."""

    iteration: int
    env_steps: int | None
    path: Path | str  # absolute local path, or the URI of one Tune stored on a bucket
    reasons: tuple[str, ...] = ()  # start, every, log, final, interrupt (the schedule's)
    trial_id: str | None = None  # Tune runs: the trial
    seed: int | None = None


def run_checkpoints(
    run: RunArtifacts | Path | str, trial: str | int | None = None, *, chain: bool = True
) -> list[RunCheckpoint]:
    """The checkpoints of a run that still exist, oldest first (by iteration).

    A continuation (a `--resume-from` run, whose manifest links its `parent`) lists its
    chain: the parent's checkpoints up to the one it resumed from (step 0 included), then
    its own (`chain=False`: its own only). A parent folder that is gone ends the chain.

    `run`: a `RunArtifacts` or a results/<run-id> folder. Read from the run's
    checkpoints.jsonl (paths relative to artifacts/<run-id>/ resolve where the run's
    artifacts are now, e.g. after a copy); a run recorded before that file existed falls
    back to its `iter_*` folders, with env steps from metrics.jsonl. For a Tune run,
    `trial` (id, id prefix or seed) keeps one trial's. Feed `(c.env_steps, c.path)` pairs to
    a probe to follow a representation over training.
    """
    from rl_harness.analysis.run_artifacts import RunArtifacts

    if not isinstance(run, RunArtifacts):
        run = RunArtifacts.open(Path(run))
    own = _own_checkpoints(run, trial)
    parent = (run.manifest or {}).get("parent") if chain else None
    if not isinstance(parent, dict) or not Path(str(parent.get("results_dir"))).is_dir():
        return own
    earlier = run_checkpoints(Path(parent["results_dir"]), trial, chain=True)
    cutoff = parent.get("iteration")
    if not isinstance(cutoff, int):  # the parent's record of it is gone: before our first
        cutoff = min((c.iteration for c in own), default=1 << 62) - 1
    mine = {(c.trial_id, c.iteration) for c in own}
    kept = [c for c in earlier if c.iteration <= cutoff and (c.trial_id, c.iteration) not in mine]
    return kept + own


def _own_checkpoints(run: RunArtifacts, trial: str | int | None) -> list[RunCheckpoint]:
    wanted = run.trial(trial).trial_id if trial is not None else None
    log = run.paths.checkpoint_log
    if not log.is_file():
        return _from_folders(run) if wanted is None else []
    found: dict[tuple[str | None, str], RunCheckpoint] = {}
    for row in read_metrics(log):
        trial_id = row.get("trial_id")
        if wanted is not None and trial_id != wanted:
            continue
        path = run.paths.resolve(str(row.get("path") or ""))
        if path is None or not (isinstance(path, str) or is_checkpoint(path)):
            continue  # gone (Tune's num_to_keep), or its artifacts are not on this machine
        seed = row.get("seed")
        steps = row.get("env_steps")
        found[(trial_id, str(path))] = RunCheckpoint(  # a path saved twice: the last row
            iteration=int(row.get("iteration") or 0),
            env_steps=int(steps) if isinstance(steps, int | float) else None,
            path=path,
            reasons=tuple(row.get("reasons") or ()),
            trial_id=trial_id,
            seed=int(seed) if isinstance(seed, int) else None,
        )
    return sorted(found.values(), key=lambda c: (c.iteration, c.trial_id or ""))


def _from_folders(run: RunArtifacts) -> list[RunCheckpoint]:
    """A run recorded before checkpoints.jsonl: its iter_* folders, env steps from metrics."""
    steps = {row.get(ITERATION_KEY): row.get(ENV_STEPS_KEY) for row in run.metrics()}
    found = []
    for path in run.checkpoints():
        iteration = int(path.name.removeprefix("iter_"))
        count = 0 if iteration == 0 else steps.get(iteration)
        found.append(
            RunCheckpoint(iteration, int(count) if isinstance(count, int | float) else None, path)
        )
    return found

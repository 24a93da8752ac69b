"""Load a trained agent from an RLlib 2.60 algorithm checkpoint: whole, or just its module.

Layout of a checkpoint written by `Algorithm.save_to_path` (new API stack):

    <checkpoint>/rllib_checkpoint.json, algorithm_state.pkl, ...
    <checkpoint>/env_runner/...
    <checkpoint>/learner_group/learner/rl_module/<module_id>/   <- one RLModule checkpoint

Module-only loading restores that RLModule (class, constructor args and weights) without
building env runners, learners or Ray: the cheap path for analysis.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rl_harness.harness.runners import resolve_checkpoint

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.core.rl_module.rl_module import RLModule

DEFAULT_MODULE_ID = "default_policy"  # ray.rllib.core.DEFAULT_MODULE_ID
MODULE_SUBDIR = Path("learner_group") / "learner" / "rl_module"


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
    from ray.rllib.core.rl_module.rl_module import RLModule

    module = RLModule.from_checkpoint(module_checkpoint_dir(checkpoint, module_id))
    module.eval()
    return module


def load_algorithm(checkpoint: Path) -> Algorithm:
    """The full Algorithm (env runners, learners) restored from `checkpoint`.

    Needs Ray (it starts a local one if none is running); call `.stop()` when done.
    """
    from ray.rllib.algorithms.algorithm import Algorithm

    return Algorithm.from_checkpoint(str(resolve_checkpoint(checkpoint)))

"""Analysis of finished runs: records, checkpoints, rollouts, probes and plots.

    RunArtifacts.open(results_dir)                  manifest, config, metrics, summary, status
    run_checkpoints(run)                            checkpoints with iteration and env steps
    load_module(checkpoint) / load_algorithm(...)   module-only or full restore
    collect_rollouts(module, make_env, ...)         representations and info targets
    evaluate_probe(representations, targets, ...)   affine probe scored on held-out episodes
    plot_belief_simplex(...) / plot_learning_curve(...) / simplex_scatter(ax, ...)
    mixed_state_scatter(beliefs, probabilities, ax=...)  a mixed-state presentation

Names load lazily, so importing one part does not pull in RLlib, torch or matplotlib. The
`TYPE_CHECKING` imports show IDEs the same names as `__all__` (tests/test_public_api.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl_harness.analysis.checkpoints import (
        DEFAULT_MODULE_ID,
        RunCheckpoint,
        load_algorithm,
        load_module,
        module_checkpoint_dir,
        module_ids,
        run_checkpoints,
    )
    from rl_harness.analysis.plots import (
        barycentric_xy,
        mixed_state_scatter,
        plot_belief_simplex,
        plot_learning_curve,
        simplex_scatter,
    )
    from rl_harness.analysis.probes import (
        AffineProbe,
        Estimate,
        PermutationNull,
        ProbeEvaluation,
        ProbeReport,
        WithinBranchReport,
        branch_ids,
        evaluate_probe,
        fit_affine,
        permutation_null,
    )
    from rl_harness.analysis.rollouts import (
        ModuleStepper,
        Rollouts,
        collect_rollouts,
        encode_representation,
        info_target,
        random_actions,
        rllib_action_transform,
    )
    from rl_harness.analysis.run_artifacts import RunArtifacts

# Public name -> the module that defines it.
_EXPORTS = {
    "RunArtifacts": "rl_harness.analysis.run_artifacts",
    "DEFAULT_MODULE_ID": "rl_harness.analysis.checkpoints",
    "load_algorithm": "rl_harness.analysis.checkpoints",
    "load_module": "rl_harness.analysis.checkpoints",
    "module_checkpoint_dir": "rl_harness.analysis.checkpoints",
    "module_ids": "rl_harness.analysis.checkpoints",
    "RunCheckpoint": "rl_harness.analysis.checkpoints",
    "run_checkpoints": "rl_harness.analysis.checkpoints",
    "ModuleStepper": "rl_harness.analysis.rollouts",
    "Rollouts": "rl_harness.analysis.rollouts",
    "collect_rollouts": "rl_harness.analysis.rollouts",
    "encode_representation": "rl_harness.analysis.rollouts",
    "info_target": "rl_harness.analysis.rollouts",
    "random_actions": "rl_harness.analysis.rollouts",
    "rllib_action_transform": "rl_harness.analysis.rollouts",
    "AffineProbe": "rl_harness.analysis.probes",
    "Estimate": "rl_harness.analysis.probes",
    "ProbeEvaluation": "rl_harness.analysis.probes",
    "ProbeReport": "rl_harness.analysis.probes",
    "evaluate_probe": "rl_harness.analysis.probes",
    "fit_affine": "rl_harness.analysis.probes",
    "barycentric_xy": "rl_harness.analysis.plots",
    "mixed_state_scatter": "rl_harness.analysis.plots",
    "plot_belief_simplex": "rl_harness.analysis.plots",
    "plot_learning_curve": "rl_harness.analysis.plots",
    "simplex_scatter": "rl_harness.analysis.plots",
    "branch_ids": "rl_harness.analysis.probes",
    "permutation_null": "rl_harness.analysis.probes",
    "WithinBranchReport": "rl_harness.analysis.probes",
    "PermutationNull": "rl_harness.analysis.probes",
}
__all__ = [
    "AffineProbe",
    "DEFAULT_MODULE_ID",
    "Estimate",
    "ModuleStepper",
    "PermutationNull",
    "ProbeEvaluation",
    "ProbeReport",
    "Rollouts",
    "RunArtifacts",
    "RunCheckpoint",
    "WithinBranchReport",
    "barycentric_xy",
    "branch_ids",
    "collect_rollouts",
    "encode_representation",
    "evaluate_probe",
    "fit_affine",
    "info_target",
    "load_algorithm",
    "load_module",
    "mixed_state_scatter",
    "module_checkpoint_dir",
    "module_ids",
    "permutation_null",
    "plot_belief_simplex",
    "plot_learning_curve",
    "random_actions",
    "rllib_action_transform",
    "run_checkpoints",
    "simplex_scatter",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl_harness.analysis' has no attribute {name!r}")

"""Analysis of finished runs: records, checkpoints, rollouts, probes and plots.

    RunArtifacts.open(results_dir)                  manifest, config, metrics, summary, status
    reopen_run(results_dir)                         the RunContext a finished run ran with, its
                                                    recipe and checkpoints (refuses changed code)
    run_stages(context, ANALYSIS_STAGES)            a leaf's AnalysisStages, skipping current
                                                    ones (analysis_provenance.json)
    run_checkpoints(run)                            checkpoints with iteration and env steps
    load_module(checkpoint) / load_algorithm(...)   module-only or full restore
    collect_rollouts(module, make_env, ...)         representations and info targets
    evaluate_probe(representations, targets, ProbeSettings(seed=...))   affine probe scored
                                                    on held-out episodes
    replay_rollouts(control, agent_rollouts)        any module on the agent's own observations
    compare_with_windows(agent_probe, inputs, ...)  memory against window baselines k = 1..K
    incremental_r2(agent_probe, inputs, ...)        what a representation adds to a window k
    score_controls(rollouts, control_features, ...)  agent vs untrained, observation, windows,
                                                    incremental R², from one set of rollouts
    policy_readouts({name: rollouts}, reference, ...)  a Discrete policy against a reference
    memory_yardstick(agent_probe, beliefs_by_m, ...)  against exact filters of the last m steps
    random_feature_probe(...) / mlp_probe(...)      random ReLU features; the windows' MLP probe
    paired_difference(...) / conditional_permutation_null(...)   tests of the differences
    seed_test(values) / holm_adjust(p_values) / seeds_for_power(sd, effect)   across training
                                                    seeds: t-test, Holm, power at a stated effect
    probe_layers(module, rollouts, ...)             every block's residual, one replay
    probe_checkpoints([(env_steps, path)], ...)     R² over training on the same rollouts
    probe_checkpoints_closed_loop(..., collect)     each checkpoint on its own rollouts
    check_closed_loop(module, collect, score=...)   its arguments checked before training
    input_counterfactual / ablate_rollouts / action_agreement   edited and ablated inputs,
                                                    agreement with a reference policy
    belief_interventions(module, rollouts, ...)     edit the probed belief, score the action
                                                    shift against an optimal policy's
    EncoderAPI / ResidualStreamAPI / PolicyHeadsAPI / ...   what analysis reads from a module
                                                    (typed contracts; require_api checks them)
    plot_belief_simplex(...) / plot_learning_curve(...) / simplex_scatter(ax, ...)
    mixed_state_scatter(beliefs, probabilities, ax=...)  a mixed-state presentation

Names load lazily, so importing one part does not pull in RLlib, torch or matplotlib. The
`TYPE_CHECKING` imports show IDEs the same names as `__all__` (tests/test_public_api.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl_harness.analysis.checkpoint_probes import (
        CheckpointProbe,
        plot_probe_over_training,
        probe_checkpoints,
    )
    from rl_harness.analysis.checkpoints import (
        DEFAULT_MODULE_ID,
        RunCheckpoint,
        load_algorithm,
        load_module,
        module_checkpoint_dir,
        module_ids,
        run_checkpoints,
    )
    from rl_harness.analysis.closed_loop import (
        ClosedLoopProbe,
        CounterfactualReport,
        ablate_rollouts,
        ablation_preprocess,
        action_agreement,
        check_closed_loop,
        counterfactual_representations,
        input_counterfactual,
        probe_checkpoints_closed_loop,
        shift_report,
        swap_one_hot,
    )
    from rl_harness.analysis.controls import (
        ActionBranching,
        ControlScores,
        action_branching,
        policy_readouts,
        score_controls,
    )
    from rl_harness.analysis.incremental import (
        IncrementalControl,
        IncrementalR2,
        IncrementalRow,
        incremental_r2,
    )
    from rl_harness.analysis.interventions import (
        BeliefEdit,
        Intervention,
        InterventionReport,
        ShiftScores,
        belief_interventions,
        corner_beliefs,
        intervene,
        minimum_norm_edit,
        orthogonal_directions,
        other_step_beliefs,
        plot_action_shifts,
        policy_actions,
        shift_difference,
        shift_scores,
    )
    from rl_harness.analysis.layer_probes import LayerProbes, probe_layers
    from rl_harness.analysis.module_api import (
        EncoderAPI,
        PolicyHeadsAPI,
        PrevActionInputAPI,
        ResidualEditAPI,
        ResidualStreamAPI,
        StepEncoderAPI,
        require_api,
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
        HeldOutScores,
        PermutationNull,
        ProbeEvaluation,
        ProbeReport,
        ProbeSettings,
        WithinBranchReport,
        branch_ids,
        conditional_permutation_null,
        evaluate_probe,
        fit_affine,
        held_out_scores,
        holm_adjust,
        paired_difference,
        permutation_null,
        quantile_bins,
        window_features,
    )
    from rl_harness.analysis.readme_tables import readme_main, render_blocks
    from rl_harness.analysis.reopen import ReopenedRun, ReopenError, reopen_run
    from rl_harness.analysis.replay import (
        replay_observations,
        replay_rollouts,
        replay_rollouts_named,
        residual_representations,
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
    from rl_harness.analysis.seed_statistics import (
        SeedTest,
        seed_test,
        seeds_for_power,
        t_test_power,
    )
    from rl_harness.analysis.stages import AnalysisStage, StageError, run_stages
    from rl_harness.analysis.windows import (
        FitMemo,
        WindowRegressor,
        WindowTable,
        compare_with_windows,
        fit_window_baselines,
    )
    from rl_harness.analysis.yardstick import (
        Baseline,
        MemoryYardstick,
        equivalent_m,
        memory_yardstick,
        mlp_probe,
        random_feature_probe,
        spread,
        untrained_like,
        within_branch_variance_fraction,
    )

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
    "ProbeSettings": "rl_harness.analysis.probes",
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
    "HeldOutScores": "rl_harness.analysis.probes",
    "conditional_permutation_null": "rl_harness.analysis.probes",
    "held_out_scores": "rl_harness.analysis.probes",
    "paired_difference": "rl_harness.analysis.probes",
    "quantile_bins": "rl_harness.analysis.probes",
    "window_features": "rl_harness.analysis.probes",
    "holm_adjust": "rl_harness.analysis.probes",
    "IncrementalControl": "rl_harness.analysis.incremental",
    "IncrementalR2": "rl_harness.analysis.incremental",
    "IncrementalRow": "rl_harness.analysis.incremental",
    "incremental_r2": "rl_harness.analysis.incremental",
    "ActionBranching": "rl_harness.analysis.controls",
    "ControlScores": "rl_harness.analysis.controls",
    "action_branching": "rl_harness.analysis.controls",
    "policy_readouts": "rl_harness.analysis.controls",
    "score_controls": "rl_harness.analysis.controls",
    "replay_observations": "rl_harness.analysis.replay",
    "replay_rollouts": "rl_harness.analysis.replay",
    "replay_rollouts_named": "rl_harness.analysis.replay",
    "residual_representations": "rl_harness.analysis.replay",
    "FitMemo": "rl_harness.analysis.windows",
    "WindowRegressor": "rl_harness.analysis.windows",
    "WindowTable": "rl_harness.analysis.windows",
    "compare_with_windows": "rl_harness.analysis.windows",
    "fit_window_baselines": "rl_harness.analysis.windows",
    "Baseline": "rl_harness.analysis.yardstick",
    "MemoryYardstick": "rl_harness.analysis.yardstick",
    "equivalent_m": "rl_harness.analysis.yardstick",
    "memory_yardstick": "rl_harness.analysis.yardstick",
    "mlp_probe": "rl_harness.analysis.yardstick",
    "random_feature_probe": "rl_harness.analysis.yardstick",
    "spread": "rl_harness.analysis.yardstick",
    "untrained_like": "rl_harness.analysis.yardstick",
    "within_branch_variance_fraction": "rl_harness.analysis.yardstick",
    "LayerProbes": "rl_harness.analysis.layer_probes",
    "probe_layers": "rl_harness.analysis.layer_probes",
    "ClosedLoopProbe": "rl_harness.analysis.closed_loop",
    "check_closed_loop": "rl_harness.analysis.closed_loop",
    "CounterfactualReport": "rl_harness.analysis.closed_loop",
    "ablate_rollouts": "rl_harness.analysis.closed_loop",
    "ablation_preprocess": "rl_harness.analysis.closed_loop",
    "action_agreement": "rl_harness.analysis.closed_loop",
    "counterfactual_representations": "rl_harness.analysis.closed_loop",
    "input_counterfactual": "rl_harness.analysis.closed_loop",
    "probe_checkpoints_closed_loop": "rl_harness.analysis.closed_loop",
    "shift_report": "rl_harness.analysis.closed_loop",
    "swap_one_hot": "rl_harness.analysis.closed_loop",
    "CheckpointProbe": "rl_harness.analysis.checkpoint_probes",
    "plot_probe_over_training": "rl_harness.analysis.checkpoint_probes",
    "probe_checkpoints": "rl_harness.analysis.checkpoint_probes",
    "BeliefEdit": "rl_harness.analysis.interventions",
    "Intervention": "rl_harness.analysis.interventions",
    "InterventionReport": "rl_harness.analysis.interventions",
    "ShiftScores": "rl_harness.analysis.interventions",
    "belief_interventions": "rl_harness.analysis.interventions",
    "corner_beliefs": "rl_harness.analysis.interventions",
    "intervene": "rl_harness.analysis.interventions",
    "minimum_norm_edit": "rl_harness.analysis.interventions",
    "orthogonal_directions": "rl_harness.analysis.interventions",
    "other_step_beliefs": "rl_harness.analysis.interventions",
    "plot_action_shifts": "rl_harness.analysis.interventions",
    "policy_actions": "rl_harness.analysis.interventions",
    "shift_difference": "rl_harness.analysis.interventions",
    "shift_scores": "rl_harness.analysis.interventions",
    "EncoderAPI": "rl_harness.analysis.module_api",
    "PolicyHeadsAPI": "rl_harness.analysis.module_api",
    "PrevActionInputAPI": "rl_harness.analysis.module_api",
    "ResidualEditAPI": "rl_harness.analysis.module_api",
    "ResidualStreamAPI": "rl_harness.analysis.module_api",
    "StepEncoderAPI": "rl_harness.analysis.module_api",
    "require_api": "rl_harness.analysis.module_api",
    "readme_main": "rl_harness.analysis.readme_tables",
    "render_blocks": "rl_harness.analysis.readme_tables",
    "ReopenError": "rl_harness.analysis.reopen",
    "ReopenedRun": "rl_harness.analysis.reopen",
    "reopen_run": "rl_harness.analysis.reopen",
    "AnalysisStage": "rl_harness.analysis.stages",
    "StageError": "rl_harness.analysis.stages",
    "run_stages": "rl_harness.analysis.stages",
    "SeedTest": "rl_harness.analysis.seed_statistics",
    "seed_test": "rl_harness.analysis.seed_statistics",
    "seeds_for_power": "rl_harness.analysis.seed_statistics",
    "t_test_power": "rl_harness.analysis.seed_statistics",
}
__all__ = [
    "ActionBranching",
    "AffineProbe",
    "AnalysisStage",
    "Baseline",
    "BeliefEdit",
    "CheckpointProbe",
    "ClosedLoopProbe",
    "ControlScores",
    "CounterfactualReport",
    "DEFAULT_MODULE_ID",
    "EncoderAPI",
    "Estimate",
    "FitMemo",
    "HeldOutScores",
    "IncrementalControl",
    "IncrementalR2",
    "IncrementalRow",
    "Intervention",
    "InterventionReport",
    "LayerProbes",
    "MemoryYardstick",
    "ModuleStepper",
    "PermutationNull",
    "PolicyHeadsAPI",
    "PrevActionInputAPI",
    "ProbeEvaluation",
    "ProbeReport",
    "ProbeSettings",
    "ReopenError",
    "ReopenedRun",
    "ResidualEditAPI",
    "ResidualStreamAPI",
    "Rollouts",
    "RunArtifacts",
    "RunCheckpoint",
    "SeedTest",
    "ShiftScores",
    "StageError",
    "StepEncoderAPI",
    "WindowRegressor",
    "WindowTable",
    "WithinBranchReport",
    "ablate_rollouts",
    "ablation_preprocess",
    "action_agreement",
    "action_branching",
    "barycentric_xy",
    "belief_interventions",
    "branch_ids",
    "check_closed_loop",
    "collect_rollouts",
    "compare_with_windows",
    "conditional_permutation_null",
    "corner_beliefs",
    "counterfactual_representations",
    "encode_representation",
    "equivalent_m",
    "evaluate_probe",
    "fit_affine",
    "fit_window_baselines",
    "held_out_scores",
    "holm_adjust",
    "incremental_r2",
    "info_target",
    "input_counterfactual",
    "intervene",
    "load_algorithm",
    "load_module",
    "memory_yardstick",
    "minimum_norm_edit",
    "mixed_state_scatter",
    "mlp_probe",
    "module_checkpoint_dir",
    "module_ids",
    "orthogonal_directions",
    "other_step_beliefs",
    "paired_difference",
    "permutation_null",
    "plot_action_shifts",
    "plot_belief_simplex",
    "plot_learning_curve",
    "plot_probe_over_training",
    "policy_actions",
    "policy_readouts",
    "probe_checkpoints",
    "probe_checkpoints_closed_loop",
    "probe_layers",
    "quantile_bins",
    "random_actions",
    "random_feature_probe",
    "readme_main",
    "render_blocks",
    "reopen_run",
    "replay_observations",
    "replay_rollouts",
    "replay_rollouts_named",
    "require_api",
    "residual_representations",
    "rllib_action_transform",
    "run_checkpoints",
    "run_stages",
    "score_controls",
    "seed_test",
    "seeds_for_power",
    "shift_difference",
    "shift_report",
    "shift_scores",
    "simplex_scatter",
    "spread",
    "swap_one_hot",
    "t_test_power",
    "untrained_like",
    "window_features",
    "within_branch_variance_fraction",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rl_harness.analysis' has no attribute {name!r}")

"""Affine probes of representations, scored on held-out episodes with bootstrap intervals.

Pure NumPy/SciPy: `ProbeSettings` (the protocol every probe entry point takes),
`fit_affine` / `AffineProbe` (least squares with bias, optional ridge; `ridge_solver`, the
one solver, factored once so a permutation null's refits share it; `row_blocks` /
`block_ridge`, its fits on unions of row blocks from one factor per block),
`episode_sums` / `scores` (R² per target and pooled, RMSE, MSE, baselines),
`split_episodes`, `bootstrap_weights` / `percentile_interval`, within-branch R²
(`branch_ids`, `branch_sums`, `within_scores`), permutation nulls (`permutation_null` of the
global R², `conditional_permutation_null` of the within-branch R²), held-out scores of any
predictions and paired bootstrap differences (`held_out_scores`, `paired_difference`,
`r2_samples`), Holm's correction and one-sided bootstrap p-values (`holm_adjust`,
`bootstrap_p_greater`),
windows of a sequence and binned actions (`window_features`, `quantile_bins`), and
`evaluate_probe`, which composes them into a `ProbeReport` (with `to_dict()`).
"""

from rl_harness.analysis.probes.affine import (
    AffineProbe,
    RidgeSolver,
    RowBlocks,
    block_ridge,
    fit_affine,
    ridge_solver,
    row_blocks,
)
from rl_harness.analysis.probes.bootstrap import (
    Estimate,
    bootstrap_weights,
    estimates,
    percentile_interval,
)
from rl_harness.analysis.probes.branches import (
    BranchSums,
    WithinScores,
    branch_ids,
    branch_sums,
    within_scores,
)
from rl_harness.analysis.probes.evaluate import (
    ProbeEvaluation,
    ProbeReport,
    WithinBranchReport,
    evaluate_probe,
)
from rl_harness.analysis.probes.multiple import bootstrap_p_greater, holm_adjust
from rl_harness.analysis.probes.paired import (
    HeldOutScores,
    held_out_scores,
    paired_difference,
    r2_samples,
)
from rl_harness.analysis.probes.permutation import (
    PermutationNull,
    conditional_permutation_null,
    permutation_null,
    within_branch_shuffle,
)
from rl_harness.analysis.probes.scores import EpisodeSums, Scores, episode_sums, scores
from rl_harness.analysis.probes.settings import ProbeSettings
from rl_harness.analysis.probes.split import split_episodes
from rl_harness.analysis.probes.windows import quantile_bins, window_features

__all__ = [
    "ProbeSettings",
    "RidgeSolver",
    "RowBlocks",
    "block_ridge",
    "row_blocks",
    "ridge_solver",
    "HeldOutScores",
    "conditional_permutation_null",
    "held_out_scores",
    "paired_difference",
    "r2_samples",
    "bootstrap_p_greater",
    "holm_adjust",
    "quantile_bins",
    "window_features",
    "within_branch_shuffle",
    "AffineProbe",
    "BranchSums",
    "PermutationNull",
    "WithinBranchReport",
    "WithinScores",
    "branch_ids",
    "branch_sums",
    "permutation_null",
    "within_scores",
    "EpisodeSums",
    "Estimate",
    "ProbeEvaluation",
    "ProbeReport",
    "Scores",
    "bootstrap_weights",
    "episode_sums",
    "estimates",
    "evaluate_probe",
    "fit_affine",
    "percentile_interval",
    "scores",
    "split_episodes",
]

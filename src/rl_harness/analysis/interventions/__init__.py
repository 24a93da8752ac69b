"""Causal belief interventions: does the policy act on the belief its probe reads?

A probe shows that a belief is decodable from a representation, not that the policy uses
it. Here the representation at one layer is edited, within one step, so that the probe
reads a chosen counterfactual belief b', and the rest of the module runs from the edited
representation; the policy's action shift is then compared with the shift an optimal
policy makes between the belief b and b' (any callable, e.g. a belief-MDP solver's policy:
analysis knows no env, the caller injects it). See docs/interventions.md.

One concern per module:

- `edits.py`: the minimum-norm edit that makes a probe read b' (`minimum_norm_edit`,
  `probe_subspace`) and the random orthogonal control (`orthogonal_directions`);
  `BeliefEdit`. Pure NumPy.
- `counterfactuals.py`: the b' to edit towards (`corner_beliefs`, `other_step_beliefs`).
- `intervene.py`: `intervene`, the rollouts replayed through the module (stepped as
  `replay.py` steps them, the carried state unedited) with each recorded step edited beside
  its unedited read; what a module needs for it (`require_intervention_api`, from the
  contracts in `rl_harness.analysis.module_api`).
- `actions.py`: the policy's action from its heads' outputs (`policy_actions`) and the
  share of it an action transform clips (`clipped_fraction`).
- `scores.py`: the action shift against the optimal one (`shift_scores`,
  `shift_difference`), from per-episode sums with episode-bootstrap intervals.
- `report.py`: `belief_interventions`, the whole test for an agent and a control module,
  and its records (`InterventionReport`, `LayerInterventions`, `EditScores`).
- `figure.py`: `plot_action_shifts`.
"""

from rl_harness.analysis.interventions.actions import clipped_fraction, policy_actions
from rl_harness.analysis.interventions.counterfactuals import corner_beliefs, other_step_beliefs
from rl_harness.analysis.interventions.edits import (
    RANK_TOL,
    BeliefEdit,
    ProbeSubspace,
    minimum_norm_edit,
    orthogonal_directions,
    probe_subspace,
)
from rl_harness.analysis.interventions.figure import plot_action_shifts
from rl_harness.analysis.interventions.intervene import (
    FINAL_NORM,
    REPRESENTATION,
    Intervention,
    PolicyOutputs,
    intervene,
    layer_features,
    require_intervention_api,
)
from rl_harness.analysis.interventions.report import (
    BELIEF,
    DEFAULT_STREAM,
    RANDOM,
    EditScores,
    InterventionReport,
    LayerInterventions,
    belief_interventions,
)
from rl_harness.analysis.interventions.scores import (
    SHIFT_TOL,
    STATISTICS,
    ShiftScores,
    shift_difference,
    shift_scores,
    shift_statistics,
    shift_sums,
)

__all__ = [
    "BELIEF",
    "DEFAULT_STREAM",
    "FINAL_NORM",
    "RANDOM",
    "RANK_TOL",
    "REPRESENTATION",
    "SHIFT_TOL",
    "STATISTICS",
    "BeliefEdit",
    "EditScores",
    "Intervention",
    "InterventionReport",
    "LayerInterventions",
    "PolicyOutputs",
    "ProbeSubspace",
    "ShiftScores",
    "belief_interventions",
    "clipped_fraction",
    "corner_beliefs",
    "intervene",
    "layer_features",
    "minimum_norm_edit",
    "orthogonal_directions",
    "other_step_beliefs",
    "plot_action_shifts",
    "policy_actions",
    "probe_subspace",
    "require_intervention_api",
    "shift_difference",
    "shift_scores",
    "shift_statistics",
    "shift_sums",
]

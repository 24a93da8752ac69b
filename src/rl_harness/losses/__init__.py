"""rl_harness.losses: loss math, target connectors and cooperative Learner mixins."""

from rl_harness.losses.aux_mixins import (
    NextTokenAuxLossMixin,
    StateAuxLossMixin,
    add_aux_classification_loss,
    aux_weight,
)
from rl_harness.losses.classification import masked_accuracy, masked_cross_entropy
from rl_harness.losses.info_targets import InfoTargetsToBatch

__all__ = [
    "InfoTargetsToBatch",
    "NextTokenAuxLossMixin",
    "StateAuxLossMixin",
    "add_aux_classification_loss",
    "aux_weight",
    "masked_accuracy",
    "masked_cross_entropy",
]

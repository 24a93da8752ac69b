"""rl_harness.losses: loss math and cooperative Learner mixins (`InfoTargetsToBatch`, the
connector piece that writes their targets, is re-exported from `learners.connectors`)."""

from rl_harness.learners.connectors.info_targets import InfoTargetsToBatch
from rl_harness.losses.aux_mixins import (
    NextTokenAuxLossMixin,
    StateAuxLossMixin,
    add_aux_classification_loss,
    aux_weight,
)
from rl_harness.losses.classification import masked_accuracy, masked_cross_entropy
from rl_harness.losses.optimizer_mixin import ConfiguredOptimizerMixin
from rl_harness.losses.supervised import (
    NEXT_TOKEN_TARGETS,
    SUPERVISED_NEXT_TOKEN,
    SupervisedNextTokenLossMixin,
    next_token_loss,
)

__all__ = [
    "NEXT_TOKEN_TARGETS",
    "SUPERVISED_NEXT_TOKEN",
    "ConfiguredOptimizerMixin",
    "InfoTargetsToBatch",
    "NextTokenAuxLossMixin",
    "StateAuxLossMixin",
    "SupervisedNextTokenLossMixin",
    "add_aux_classification_loss",
    "aux_weight",
    "masked_accuracy",
    "masked_cross_entropy",
    "next_token_loss",
]

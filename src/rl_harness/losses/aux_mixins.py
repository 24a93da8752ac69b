"""Cooperative Learner mixins that add weighted auxiliary classification losses.

Compose before the algorithm's torch Learner:

    class MyLearner(NextTokenAuxLossMixin, PPOTorchLearner): ...

    config.learners(
        learner_class=MyLearner,
        learner_config_dict={"next_token_aux/weight": 0.5},
    )

Each mixin names its namespace (`aux_keys`); their shared base,
`AuxClassificationLossMixin`, calls the base loss first and adds weight * aux for every
mixin composed (the base-most first), where aux is the masked cross-entropy of the paired
head's `<ns>/logits` against the batch column `<ns>/targets` (see `InfoTargetsToBatch`),
over steps where both `loss_mask` and `<ns>/target_valid` hold. Weight 0 returns the base
loss object itself, untouched. Metrics go to `<ns>/loss` and `<ns>/accuracy` under the
module id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override

from rl_harness.learners.aux_keys import NEXT_TOKEN_AUX, STATE_AUX, AuxKeys
from rl_harness.losses.classification import masked_accuracy, masked_cross_entropy


def aux_weight(learner_config_dict: Mapping[str, Any], keys: AuxKeys) -> float:
    """The loss weight `<ns>/weight`: required, a finite number >= 0."""
    if keys.weight not in learner_config_dict:
        raise ValueError(
            f"learner_config_dict is missing {keys.weight!r}: the {keys.namespace} loss "
            "mixin is composed, so set its weight (0.0 switches the term off)"
        )
    weight = learner_config_dict[keys.weight]
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight < 1e30:
        raise ValueError(f"learner_config_dict[{keys.weight!r}] must be >= 0, got {weight!r}")
    return float(weight)


def add_aux_classification_loss(
    learner: Any,
    keys: AuxKeys,
    *,
    module_id: str,
    config: Any,
    batch: dict[str, Any],
    fwd_out: dict[str, Any],
    total: torch.Tensor,
) -> torch.Tensor:
    """`total + weight * masked CE(<ns>/logits, <ns>/targets)`; `total` itself if weight 0."""
    weight = aux_weight(config.learner_config_dict, keys)
    if weight == 0.0:
        return total
    if keys.logits not in fwd_out:
        raise KeyError(
            f"fwd_out has no {keys.logits!r}: compose the matching head mixin into the "
            f"RLModule (or set {keys.weight!r} to 0)"
        )
    if keys.targets not in batch:
        raise KeyError(
            f"train batch has no {keys.targets!r} column: add a learner connector that "
            f"writes it, e.g. InfoTargetsToBatch(targets={{{keys.namespace!r}: ...}})"
        )
    mask = batch.get(Columns.LOSS_MASK)
    valid = batch.get(keys.target_valid)
    if valid is not None:
        mask = valid if mask is None else mask & valid
    logits, targets = fwd_out[keys.logits], batch[keys.targets]
    loss = masked_cross_entropy(logits, targets, mask)
    with torch.no_grad():
        accuracy = masked_accuracy(logits, targets, mask)
    learner.metrics.log_dict(
        {keys.loss_metric: loss.detach(), keys.accuracy_metric: accuracy},
        key=module_id,
        window=1,
    )
    return total + weight * loss


def _composed_aux_keys(learner_class: type) -> list[AuxKeys]:
    """The `aux_keys` of every aux-loss mixin in the class's MRO, base-most first."""
    return [
        cls.__dict__["aux_keys"]
        for cls in reversed(learner_class.__mro__)
        if isinstance(cls.__dict__.get("aux_keys"), AuxKeys)
    ]


# To mypy the mixin is the Learner it is composed with (its super() calls and the
# attributes it reads are Learner's); at run time it is a plain mixin.
if TYPE_CHECKING:
    _LearnerBase = Learner
else:
    _LearnerBase = object


class AuxClassificationLossMixin(_LearnerBase):
    """The shared piece of the aux-loss mixins: one term per mixin composed.

    Each subclass only names its `aux_keys`. However many are composed, this class sits once
    in the MRO and adds every composed term (base-most mixin first), so composing
    `StateAuxLossMixin, NextTokenAuxLossMixin` adds both.
    """

    aux_keys: AuxKeys  # set by each concrete mixin

    @override(Learner)
    def build(self) -> None:
        super().build()
        for keys in _composed_aux_keys(type(self)):
            aux_weight(self.config.learner_config_dict, keys)

    @override(Learner)
    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        # To mypy super() is the abstract Learner; at run time it is the algorithm's torch
        # learner (e.g. PPOTorchLearner), whose loss is a Tensor.
        base = super().compute_loss_for_module(  # type: ignore[safe-super]
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )
        total = cast(torch.Tensor, base)
        for keys in _composed_aux_keys(type(self)):
            total = add_aux_classification_loss(
                self,
                keys,
                module_id=module_id,
                config=config,
                batch=batch,
                fwd_out=fwd_out,
                total=total,
            )
        return total


class NextTokenAuxLossMixin(AuxClassificationLossMixin):
    """Adds `next_token_aux/weight` * CE(next_token_aux/logits, next_token_aux/targets)."""

    aux_keys = NEXT_TOKEN_AUX


class StateAuxLossMixin(AuxClassificationLossMixin):
    """Adds `state_aux/weight` * CE(state_aux/logits, state_aux/targets)."""

    aux_keys = STATE_AUX

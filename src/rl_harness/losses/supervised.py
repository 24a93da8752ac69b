"""Supervised next-token training as an RLlib Learner: the loss is the next token's
cross-entropy and nothing else.

A passive process (any finite HMM whose actions do not change it, e.g. MESS3 with
NextTokenTask) can be learnt by prediction instead of reward. Compose the mixin before an
algorithm's torch Learner and the run is an ordinary RLlib run: the env runners sample
the same episodes (same seeds, same number of tokens), the harness records it like any RL
run (`run_algorithm`: metrics, checkpoints, `--log-to`), and the module is the same class
as the RL agent's, so probes and greedy accuracy compare one to one.

    class SupervisedPPOLearner(SupervisedNextTokenLossMixin, PPOTorchLearner): ...

    config.learners(
        learner_class=SupervisedPPOLearner,
        learner_connector=functools.partial(InfoTargetsToBatch, targets=NEXT_TOKEN_TARGETS),
    )

with "token" in the env's `info`. The policy head's logits (`Columns.ACTION_DIST_INPUTS`,
a Discrete action space with one action per token) are the prediction: the loss is their
masked cross-entropy against the batch column `next_token/targets` (info["token"] one step
ahead, written by `InfoTargetsToBatch`), over steps where `loss_mask` and
`next_token/target_valid` hold. The algorithm's own loss (PPO's policy, value and entropy
terms) is never computed, so the value head gets no gradient; RLlib's learner pipeline
still runs (PPO's advantage estimate reads the untrained value head, and is unused).
Minibatches, epochs, the optimizer and its learning rate are the algorithm config's.

Metrics under the module id: `next_token/loss` (nats per token), `next_token/loss_bits`
and `next_token/accuracy` (argmax = the next token).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.utils.annotations import override

from rl_harness.learners.aux_keys import AuxKeys
from rl_harness.losses.classification import masked_accuracy, masked_cross_entropy

# Batch columns next_token/targets and next_token/target_valid; metrics next_token/loss and
# next_token/accuracy.
SUPERVISED_NEXT_TOKEN = AuxKeys("next_token")
# InfoTargetsToBatch's targets for it: the token the env emits after each step.
NEXT_TOKEN_TARGETS = {SUPERVISED_NEXT_TOKEN.namespace: {"info_key": "token", "shift": 1}}
LOSS_BITS_METRIC = f"{SUPERVISED_NEXT_TOKEN.namespace}/loss_bits"
_NATS_TO_BITS = 1.0 / math.log(2.0)


def next_token_loss(
    logits: torch.Tensor, batch: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked mean cross-entropy in nats, masked accuracy) of `logits` (..., n_tokens)
    against `next_token/targets`, over `loss_mask` & `next_token/target_valid`."""
    keys = SUPERVISED_NEXT_TOKEN
    if keys.targets not in batch:
        raise KeyError(
            f"train batch has no {keys.targets!r} column: add the learner connector "
            "functools.partial(InfoTargetsToBatch, targets=NEXT_TOKEN_TARGETS) and put "
            "'token' in the env's info"
        )
    mask = batch.get(Columns.LOSS_MASK)
    valid = batch.get(keys.target_valid)
    if valid is not None:
        mask = valid if mask is None else mask & valid
    targets = batch[keys.targets]
    loss = masked_cross_entropy(logits, targets, mask)
    with torch.no_grad():
        accuracy = masked_accuracy(logits, targets, mask)
    return loss, accuracy


# To mypy the mixin is the Learner it is composed with (its super() calls and the
# attributes it reads are Learner's); at run time it is a plain mixin.
if TYPE_CHECKING:
    _LearnerBase = Learner
else:
    _LearnerBase = object


class SupervisedNextTokenLossMixin(_LearnerBase):
    """Replaces the algorithm's loss by the next token's cross-entropy on the policy logits."""

    @override(Learner)
    def build(self) -> None:
        super().build()
        for module_id in self.module.keys():
            space = self.module[module_id].action_space
            if not isinstance(space, gym.spaces.Discrete):
                raise ValueError(
                    f"supervised next-token training reads the policy logits as token "
                    f"predictions, so module {module_id!r} needs a Discrete action space (one "
                    f"action per token, e.g. NextTokenTask), got {space}"
                )

    @override(Learner)
    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        # Deliberately no super(): the algorithm's loss terms are not part of this objective.
        loss, accuracy = next_token_loss(fwd_out[Columns.ACTION_DIST_INPUTS], batch)
        keys = SUPERVISED_NEXT_TOKEN
        self.metrics.log_dict(
            {
                keys.loss_metric: loss.detach(),
                LOSS_BITS_METRIC: loss.detach() * _NATS_TO_BITS,
                keys.accuracy_metric: accuracy,
            },
            key=module_id,
            window=1,
        )
        return loss

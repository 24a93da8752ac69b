"""The auxiliary loss counts only steps that are both in the loss mask and target-valid."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from rl_harness.learners.aux_keys import NEXT_TOKEN_AUX as KEYS
from rl_harness.losses.aux_mixins import add_aux_classification_loss

# Two sequences of three steps, three classes. Logits are log-probabilities, so a step's
# cross-entropy is -log p(target).
P_TARGET = [[0.5, 0.25, 1e-6], [1e-6, 1e-6, 1e-6]]
LOSS_MASK = [[True, True, True], [True, False, False]]  # seq 1 padded after its first step
VALID = [[True, True, False], [False, True, False]]  # no target past an episode's end
# Counted: only (0, 0) and (0, 1), with CE ln 2 and ln 4; every other step costs ~13.8 nats.
EXPECTED_CE = (math.log(2) + math.log(4)) / 2


def _logits(p_target: list[list[float]]) -> torch.Tensor:
    rows = []
    for seq in p_target:
        steps = []
        for p in seq:
            # target class 0 gets p, the rest share 1 - p; argmax is class 0 only when p > 1/3,
            # except p = 1/4 (others 3/8 each): a miss.
            rest = (1.0 - p) / 2
            steps.append([math.log(p), math.log(rest), math.log(rest)])
        rows.append(steps)
    return torch.tensor(rows, dtype=torch.float32)


def _call(batch_extra: dict, weight: float = 0.5):
    learner = SimpleNamespace(metrics=MetricsLogger())
    config = PPOConfig().learners(learner_config_dict={KEYS.weight: weight})
    batch = {KEYS.targets: torch.zeros(2, 3, dtype=torch.long), **batch_extra}
    total = add_aux_classification_loss(
        learner,
        KEYS,
        module_id="default_policy",
        config=config,
        batch=batch,
        fwd_out={KEYS.logits: _logits(P_TARGET)},
        total=torch.tensor(2.0),
    )
    peek = learner.metrics.peek
    return (
        total.item(),
        peek(("default_policy", KEYS.loss_metric)).item(),
        peek(("default_policy", KEYS.accuracy_metric)).item(),
    )


def test_padded_and_invalid_steps_do_not_count():
    total, loss, accuracy = _call(
        {
            Columns.LOSS_MASK: torch.tensor(LOSS_MASK),
            KEYS.target_valid: torch.tensor(VALID),
        }
    )
    assert loss == pytest.approx(EXPECTED_CE, rel=1e-6)
    assert total == pytest.approx(2.0 + 0.5 * EXPECTED_CE, rel=1e-6)
    assert accuracy == 0.5  # (0, 0) is a hit, (0, 1) a miss


def test_each_mask_alone_is_applied():
    only_loss_mask = _call({Columns.LOSS_MASK: torch.tensor(LOSS_MASK)})
    only_valid = _call({KEYS.target_valid: torch.tensor(VALID)})
    big = -math.log(1e-6)
    # LOSS_MASK keeps (0,0), (0,1), (0,2), (1,0); VALID keeps (0,0), (0,1), (1,1).
    assert only_loss_mask[1] == pytest.approx((math.log(8) + 2 * big) / 4, rel=1e-5)
    assert only_valid[1] == pytest.approx((math.log(8) + big) / 3, rel=1e-5)

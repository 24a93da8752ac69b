"""Composed leaves in real PPO training: module + head mixin + loss mixin + target connector."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns

from rl_harness.learners.connectors import InfoTargetsToBatch
from rl_harness.learners.models import (
    GRUActorCritic,
    MLPActorCritic,
    NextTokenAuxHeadMixin,
    StateAuxHeadMixin,
)
from rl_harness.losses.aux_mixins import NextTokenAuxLossMixin, StateAuxLossMixin
from rl_harness.losses.classification import masked_cross_entropy
from tests.learners.ppo_setup import tiny_ppo_config
from tests.learners.token_env import NoisyCounterEnv

NEXT_TOKEN = {"next_token_aux": {"info_key": "token", "shift": 1}}


class _RecordBase:
    """Keeps the loss object the base Learner returned (observer, no behaviour change)."""

    def compute_loss_for_module(self, **kwargs):
        loss = super().compute_loss_for_module(**kwargs)
        self.base_losses = [*getattr(self, "base_losses", []), loss]
        return loss


class _RecordTotal:
    def compute_loss_for_module(self, **kwargs):
        loss = super().compute_loss_for_module(**kwargs)
        self.total_losses = [*getattr(self, "total_losses", []), loss]
        return loss


class NextTokenGRU(NextTokenAuxHeadMixin, GRUActorCritic):
    pass


class NextTokenLearner(_RecordTotal, NextTokenAuxLossMixin, _RecordBase, PPOTorchLearner):
    pass


class TwoHeadMLP(StateAuxHeadMixin, NextTokenAuxHeadMixin, MLPActorCritic):
    pass


class TwoAuxLearner(
    _RecordTotal, StateAuxLossMixin, NextTokenAuxLossMixin, _RecordBase, PPOTorchLearner
):
    pass


def _config(module_class, learner_class, learner_config, targets, model_config, **training):
    return tiny_ppo_config(
        module_class,
        model_config,
        learners={
            "learner_class": learner_class,
            "learner_config_dict": learner_config,
            "learner_connector": functools.partial(InfoTargetsToBatch, targets=targets),
        },
        **training,
    )


def _local_learner(algo):
    return algo.learner_group._learner


def _heldout_next_token_ce(module, episodes: int = 8) -> float:
    """CE of the module's next-token head on fresh episodes (targets from the env's infos)."""
    env = NoisyCounterEnv()
    obs_seqs, target_seqs = [], []
    for seed in range(1000, 1000 + episodes):
        obs, _ = env.reset(seed=seed)
        observations, targets, done = [], [], False
        while not done:
            observations.append(obs)
            obs, _, terminated, truncated, info = env.step(env.action_space.sample())
            targets.append(info["token"])
            done = terminated or truncated
        obs_seqs.append(observations)
        target_seqs.append(targets)
    batch = {Columns.OBS: torch.as_tensor(np.array(obs_seqs))}  # (B, T, W, V), zero state
    with torch.no_grad():
        logits = module.forward_train(batch)["next_token_aux/logits"]
    return masked_cross_entropy(logits, torch.as_tensor(target_seqs)).item()


def test_gru_leaf_aux_loss_decreases_on_a_learnable_target():
    # Next token = last token + 1 (mod 3) with p = 0.9: from ~ln 3 = 1.10 nats the
    # best achievable cross-entropy is ~0.29.
    config = _config(
        NextTokenGRU,
        NextTokenLearner,
        {"next_token_aux/weight": 1.0},
        NEXT_TOKEN,
        {"max_seq_len": 8, "hidden_size": 32, "next_token_aux/num_classes": 3},
        num_epochs=4,
        minibatch_size=32,
        lr=1e-2,
    )
    algo = config.build_algo()
    try:
        module = _local_learner(algo).module["default_policy"].unwrapped()
        before = _heldout_next_token_ce(module)
        for _ in range(3):
            stats = algo.train()["learners"]["default_policy"]
        after = _heldout_next_token_ce(module)
    finally:
        algo.stop()
    print(f"heldout next-token CE before {before:.3f} after {after:.3f}")
    assert before > 0.9
    assert after < 0.6, (before, after)
    assert 0.0 < stats["next_token_aux/loss"] < before
    # Chance is 1/3 and the ceiling 0.9; a head at CE < 0.6 predicts the likely token.
    assert stats["next_token_aux/accuracy"] > 0.6, stats["next_token_aux/accuracy"]


def test_zero_weight_returns_the_base_loss_object_unchanged():
    config = _config(
        NextTokenGRU,
        NextTokenLearner,
        {"next_token_aux/weight": 0.0},
        NEXT_TOKEN,
        {"max_seq_len": 8, "hidden_size": 16, "next_token_aux/num_classes": 3},
    )
    algo = config.build_algo()
    try:
        stats = algo.train()["learners"]["default_policy"]
        learner = _local_learner(algo)
        assert len(learner.total_losses) == len(learner.base_losses) > 0
        assert all(t is b for t, b in zip(learner.total_losses, learner.base_losses, strict=True))
        assert not any(key.startswith("next_token_aux/") for key in stats)
    finally:
        algo.stop()


def test_two_namespaces_pair_heads_targets_weights_and_metrics():
    config = _config(
        TwoHeadMLP,
        TwoAuxLearner,
        {"next_token_aux/weight": 0.5, "state_aux/weight": 2.0},
        NEXT_TOKEN | {"state_aux": {"info_key": "token", "shift": 0}},
        {"hidden_sizes": [32], "next_token_aux/num_classes": 3, "state_aux/num_classes": 3},
        num_epochs=4,
        lr=3e-3,
    )
    algo = config.build_algo()
    try:
        for _ in range(3):
            stats = algo.train()["learners"]["default_policy"]
        learner = _local_learner(algo)
    finally:
        algo.stop()
    # state_aux's target (the current token) is in the observation; next_token_aux's
    # is noisy: the two metrics must come from their own heads and targets.
    assert stats["state_aux/accuracy"] > 0.9
    assert stats["state_aux/loss"] < stats["next_token_aux/loss"]
    # The last loss is base + 0.5 * next-token CE + 2.0 * state CE.
    total, base = learner.total_losses[-1], learner.base_losses[-1]
    expected = base + 0.5 * stats["next_token_aux/loss"] + 2.0 * stats["state_aux/loss"]
    assert total.item() == pytest.approx(expected.item(), rel=1e-5)


def test_missing_pieces_fail_with_the_namespace_named():
    model_config = {"hidden_sizes": [8]}  # a module without the head

    class NoHeadLearner(NextTokenAuxLossMixin, PPOTorchLearner):
        pass

    with pytest.raises(ValueError, match="next_token_aux/weight"):
        _config(MLPActorCritic, NoHeadLearner, {}, NEXT_TOKEN, model_config).build_algo()

    algo = _config(
        MLPActorCritic, NoHeadLearner, {"next_token_aux/weight": 1.0}, NEXT_TOKEN, model_config
    ).build_algo()
    try:
        with pytest.raises(KeyError, match="next_token_aux/logits"):
            algo.train()
    finally:
        algo.stop()

    config = tiny_ppo_config(
        TwoHeadMLP,
        model_config | {"next_token_aux/num_classes": 3, "state_aux/num_classes": 3},
        learners={
            "learner_class": NoHeadLearner,
            "learner_config_dict": {"next_token_aux/weight": 1.0},
        },
    )
    algo = config.build_algo()
    try:
        with pytest.raises(KeyError, match="next_token_aux/targets"):
            algo.train()
    finally:
        algo.stop()

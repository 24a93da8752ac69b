"""Each RLModule inside a real RLlib PPO build, trained for 2 iterations."""

from __future__ import annotations

import math

import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian

from rl_harness.learners.models import GRUActorCritic, MLPActorCritic, TransformerActorCritic
from rl_harness.losses import ConfiguredOptimizerMixin
from tests.learners.box_env import TargetTrackingEnv
from tests.learners.ppo_setup import flat_params, tiny_ppo_config


class AdamWPPOLearner(ConfiguredOptimizerMixin, PPOTorchLearner):
    pass


CASES = {
    "mlp": (MLPActorCritic, {"hidden_sizes": [32, 32]}),
    "gru": (GRUActorCritic, {"hidden_size": 32, "max_seq_len": 8}),
    "transformer": (TransformerActorCritic, {"d_model": 16, "num_heads": 2, "num_layers": 1}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_trains_two_ppo_iterations(name):
    module_class, model_config = CASES[name]
    config = tiny_ppo_config(
        module_class,
        model_config,
        learners={
            "learner_class": AdamWPPOLearner,
            "learner_config_dict": {
                "optimizer/name": "adamw",
                "optimizer/kwargs": {"weight_decay": 0.05, "betas": [0.9, 0.95]},
            },
        },
    )
    algo = config.build_algo()
    try:
        learner = algo.learner_group._learner  # local learner: num_learners=0
        module = learner.module["default_policy"].unwrapped()
        assert type(module) is module_class
        (optimizer,) = learner._named_optimizers.values()
        assert isinstance(optimizer, torch.optim.AdamW)
        assert optimizer.defaults["weight_decay"] == 0.05
        assert optimizer.defaults["betas"] == (0.9, 0.95)

        before = flat_params(module)
        for _ in range(2):
            result = algo.train()
        stats = result["learners"]["default_policy"]
        assert math.isfinite(stats["total_loss"]) and math.isfinite(stats["vf_loss"])
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 256
        assert stats["num_module_steps_trained_lifetime"] >= 256
        after = flat_params(module)
        assert not torch.equal(before, after)
        # The env runner acts with the trained weights.
        torch.testing.assert_close(flat_params(algo.get_module()), after)
    finally:
        algo.stop()


@pytest.mark.parametrize("name", sorted(CASES))
def test_module_trains_ppo_on_a_box_action_space(name):
    module_class, model_config = CASES[name]
    config = tiny_ppo_config(
        module_class, model_config, env=TargetTrackingEnv, env_config={"dim": 3}
    )
    algo = config.build_algo()
    try:
        module = algo.learner_group._learner.module["default_policy"].unwrapped()
        assert module.get_train_action_dist_cls() is TorchDiagGaussian
        before = flat_params(module)
        result = algo.train()
        stats = result["learners"]["default_policy"]
        assert math.isfinite(stats["total_loss"]) and math.isfinite(stats["entropy"])
        assert not torch.equal(before, flat_params(module))
        # Actions in the sampled episodes are 3-D and the env accepted them.
        assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 128
    finally:
        algo.stop()


def test_ppo_iteration_with_muon_and_adamw():
    from rl_harness.learners.models import (
        StatefulTransformerActorCritic,
        prev_action_env_to_module,
        prev_action_learner,
    )
    from rl_harness.learners.optimizer import muon_param_groups

    config = tiny_ppo_config(
        StatefulTransformerActorCritic,
        {"max_seq_len": 8, "context": 8, "d_model": 16, "num_heads": 2, "num_layers": 1},
        learners={
            "learner_class": AdamWPPOLearner,
            "learner_connector": prev_action_learner,
            "learner_config_dict": {
                "optimizer/name": "muon",
                "optimizer/kwargs": {"momentum": 0.9, "weight_decay": 0.0},
                "optimizer/adamw_kwargs": {"weight_decay": 0.01},
            },
        },
    ).env_runners(env_to_module_connector=prev_action_env_to_module)
    algo = config.build_algo()
    try:
        learner = algo.learner_group._learner
        module = learner.module["default_policy"].unwrapped()
        optimizers = learner._named_optimizers
        assert set(optimizers) == {"default_policy_muon", "default_policy_adamw"}
        muon, adamw = optimizers["default_policy_muon"], optimizers["default_policy_adamw"]
        assert isinstance(muon, torch.optim.Muon) and type(adamw) is torch.optim.AdamW
        assert muon.defaults["momentum"] == 0.9 and adamw.defaults["weight_decay"] == 0.01
        matrices, rest = muon_param_groups(module)
        assert [p for g in muon.param_groups for p in g["params"]] == matrices
        assert [p for g in adamw.param_groups for p in g["params"]] == rest
        before = [p.detach().clone() for p in (matrices[0], rest[0])]
        stats = algo.train()["learners"]["default_policy"]
        assert math.isfinite(stats["total_loss"])
        assert not torch.equal(before[0], matrices[0].detach())  # Muon stepped
        assert not torch.equal(before[1], rest[0].detach())  # AdamW stepped
    finally:
        algo.stop()

"""Muon's parameter groups for the GRU: only the hidden matrices go to Muon.

Muon orthogonalizes the updates of hidden 2-D matrices; the GRU's input matrix (raw
features in) belongs to AdamW like the biases and the pi/vf heads. With one layer exactly
`weight_hh_l0` goes to Muon; a second layer adds its own input (the first layer's hidden
state) and hidden matrices. Checked on the module, and on the real PPO learner the
algorithm builds, which registers the two optimizers.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from rl_harness.learners.models import GRUActorCritic
from rl_harness.learners.optimizer import muon_param_groups
from rl_harness.losses import ConfiguredOptimizerMixin
from tests.learners.ppo_setup import tiny_ppo_config
from tests.learners.token_env import NoisyCounterEnv


class MuonPPOLearner(ConfiguredOptimizerMixin, PPOTorchLearner):
    pass


def _names(module: torch.nn.Module, params) -> set[str]:
    ids = {id(p) for p in params}
    return {name for name, p in module.named_parameters() if id(p) in ids}


@pytest.mark.parametrize(
    ("num_layers", "expected_muon"),
    [
        (1, {"gru.gru.weight_hh_l0"}),
        (2, {"gru.gru.weight_hh_l0", "gru.gru.weight_ih_l1", "gru.gru.weight_hh_l1"}),
    ],
)
def test_muon_takes_the_gru_hidden_matrices_only(num_layers, expected_muon):
    module = GRUActorCritic(
        observation_space=gym.spaces.Box(-1.0, 1.0, (5,), np.float32),
        action_space=gym.spaces.Discrete(3),
        model_config={
            "max_seq_len": 4,
            "hidden_size": 6,
            "num_layers": num_layers,
            "head_hidden_sizes": [4],
        },
    )
    muon, adamw = muon_param_groups(module)
    assert _names(module, muon) == expected_muon
    all_names = {name for name, _ in module.named_parameters()}
    assert _names(module, adamw) == all_names - expected_muon
    # The input matrix, the biases and both heads went to AdamW.
    assert {
        "gru.gru.weight_ih_l0",
        "gru.gru.bias_ih_l0",
        "gru.gru.bias_hh_l0",
        "pi.net.0.weight",
        "pi.net.2.weight",
        "vf.net.0.weight",
    } <= _names(module, adamw)
    assert module.gru.gru.weight_ih_l0.shape == (3 * 6, 5)  # raw features in: the input side


def test_a_ppo_learner_with_muon_registers_the_gru_groups():
    config = tiny_ppo_config(
        GRUActorCritic,
        {"hidden_size": 8, "max_seq_len": 8},
        learners={
            "learner_class": MuonPPOLearner,
            "learner_config_dict": {
                "optimizer/name": "muon",
                "optimizer/kwargs": {"momentum": 0.9},
            },
        },
    )
    learner = config.build_learner(env=NoisyCounterEnv())  # what the algorithm builds
    module = learner.module["default_policy"].unwrapped()
    optimizers = learner._named_optimizers
    assert set(optimizers) == {"default_policy_muon", "default_policy_adamw"}
    muon, adamw = optimizers["default_policy_muon"], optimizers["default_policy_adamw"]
    assert isinstance(muon, torch.optim.Muon) and type(adamw) is torch.optim.AdamW
    assert muon.defaults["momentum"] == 0.9
    muon_params = [p for g in muon.param_groups for p in g["params"]]
    adamw_params = [p for g in adamw.param_groups for p in g["params"]]
    assert _names(module, muon_params) == {"gru.gru.weight_hh_l0"}
    assert "gru.gru.weight_ih_l0" in _names(module, adamw_params)
    assert len(muon_params) + len(adamw_params) == len(list(module.parameters()))

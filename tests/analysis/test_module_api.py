"""The typed contracts analysis reads a module through (rl_harness.analysis.module_api):
which bundled module satisfies which, and a module lacking a method failing before any
work, with one line naming the method."""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override

import rl_harness.learners.models as models
from rl_harness.analysis import (
    EncoderAPI,
    PolicyHeadsAPI,
    PrevActionInputAPI,
    ResidualEditAPI,
    ResidualStreamAPI,
    StepEncoderAPI,
    belief_interventions,
    corner_beliefs,
    require_api,
)
from rl_harness.analysis.module_api import missing_methods
from rl_harness.learners.models import (
    ActorCriticRLModule,
    GRUActorCritic,
    MLPActorCritic,
    StatefulTransformerActorCritic,
    TransformerActorCritic,
)
from tests.analysis.test_replay import build, rollouts_of

CONTRACTS = (
    EncoderAPI,
    StepEncoderAPI,
    ResidualStreamAPI,
    PolicyHeadsAPI,
    ResidualEditAPI,
    PrevActionInputAPI,
)
# What each bundled module promises analysis (its docstring says the same).
BUNDLED = {
    MLPActorCritic: {EncoderAPI, PolicyHeadsAPI},
    GRUActorCritic: {EncoderAPI, PolicyHeadsAPI},
    TransformerActorCritic: {EncoderAPI, PolicyHeadsAPI, ResidualStreamAPI},
    StatefulTransformerActorCritic: set(CONTRACTS),
}


def test_every_bundled_module_is_listed():
    exported = {
        value
        for name in models.__all__
        if inspect.isclass(value := getattr(models, name))
        and issubclass(value, ActorCriticRLModule)
        and not inspect.isabstract(value)
    }
    assert exported == set(BUNDLED)


@pytest.mark.parametrize("module_class", list(BUNDLED), ids=lambda c: c.__name__)
def test_each_bundled_module_satisfies_exactly_its_contracts(module_class):
    satisfied = {api for api in CONTRACTS if not missing_methods(module_class, api)}
    assert satisfied == BUNDLED[module_class]
    for api in CONTRACTS:
        assert issubclass(module_class, api) == (api in BUNDLED[module_class])


@pytest.mark.parametrize("name", ["mlp", "gru", "transformer"])
def test_built_modules_satisfy_them_as_analysis_checks_them(name):
    module = build(name, seed=0)
    for api in CONTRACTS:
        assert isinstance(module, api) == (api in BUNDLED[type(module)])
        if api in BUNDLED[type(module)]:
            require_api(module, api, purpose="a test")  # no error
    missing = sorted(set().union(*(missing_methods(module, api) for api in CONTRACTS)))
    expected = {
        "mlp": ["encode_step", "encode_step_edited", "encode_step_residuals", "prev_action_width"],
        "gru": ["encode_step", "encode_step_edited", "encode_step_residuals", "prev_action_width"],
        "transformer": [],
    }
    assert missing == expected[name]


def test_require_api_names_every_missing_method_and_the_purpose():
    module = build("mlp", seed=0)
    with pytest.raises(TypeError) as error:
        require_api(module, ResidualEditAPI, purpose="editing layer 'block_1'")
    assert str(error.value) == (
        "MLPActorCritic has no encode_step_edited, encode_step_residuals: editing layer "
        "'block_1' needs a module with ResidualEditAPI (rl_harness.analysis.module_api)"
    )


class EncodeOnly(TorchRLModule):
    """A user's module: a representation (`encode`) but no heads reading a given one."""

    @override(RLModule)
    def setup(self) -> None:
        self.net = torch.nn.Linear(self.observation_space.shape[0], 4)

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.net(batch[Columns.OBS])}

    def encode(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.net(batch[Columns.OBS])


def _interventions(agent, rollouts, *, layers, control=None):
    said: list[str] = []
    call = dict(
        layers=layers,
        optimal_policy=lambda beliefs: beliefs[:, :2],
        counterfactuals={"corners": corner_beliefs(rollouts.targets, np.random.default_rng(0))},
        seed=0,
        control=control,
        n_bootstrap=10,
        progress=said.append,
    )
    return call, said


def test_a_module_lacking_a_method_fails_before_any_replay():
    agent = build("transformer", seed=0)
    rollouts = rollouts_of(agent, policy="greedy")
    # The control lacks the residual edit: refused before the agent is even replayed.
    call, said = _interventions(agent, rollouts, layers=["block_1"], control=build("gru", 1))
    with pytest.raises(
        TypeError,
        match=r"^GRUActorCritic has no encode_step_edited, encode_step_residuals: editing "
        r"layer 'block_1'",
    ):
        belief_interventions(agent, rollouts, **call)
    assert said == []
    # A user's module without forward_heads, at the layer every module has.
    space = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    user = EncodeOnly(observation_space=space, action_space=gym.spaces.Discrete(4))
    assert isinstance(user, EncoderAPI) and not isinstance(user, PolicyHeadsAPI)
    call, said = _interventions(user, rollouts, layers=["representation"])
    with pytest.raises(TypeError, match=r"^EncodeOnly has no forward_heads: an intervention"):
        belief_interventions(user, rollouts, **call)
    assert said == []

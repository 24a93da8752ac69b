"""Initialisation as a model-config choice (issue 37): each scheme gives the stated weight
statistics on real modules built through RLModuleSpec, the heads' output scales scale their
last layer, the defaults are the library's old init bit for bit, typos are refused, and a real
run's config.json records the resolved initialisation."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from torch import nn

from rl_harness.envs.hmm import HMMEnv
from rl_harness.learners.components import MLPHead
from rl_harness.learners.models import (
    GRUActorCritic,
    MLPActorCritic,
    NextTokenAuxHeadMixin,
    StatefulTransformerActorCritic,
    TransformerActorCritic,
)
from tests.learners.paper_model import ACT3, PAPER_CONFIG

ORIGINAL = {"init": "normal", "init_std": 0.02, "pi_output_scale": 1.0, "vf_output_scale": 1.0}


def _token_space() -> gym.Space:
    env = HMMEnv(
        {
            "model": "rl_harness.envs.mess3:mess3_model",
            "model_kwargs": {"x": 0.05, "alpha": 0.85},
            "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
            "token_window": 10,
        }
    )
    return env.observation_space


class _AuxTransformer(NextTokenAuxHeadMixin, TransformerActorCritic):
    pass


def _cases() -> dict[str, tuple[type, gym.Space, dict]]:
    box = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    return {
        "paper_transformer": (TransformerActorCritic, _token_space(), PAPER_CONFIG),
        "stateful_transformer": (
            StatefulTransformerActorCritic,
            box,
            {"max_seq_len": 8, "context": 8, "d_model": 32, "num_heads": 2, "num_layers": 2},
        ),
        "mlp": (MLPActorCritic, box, {"hidden_sizes": [64, 64]}),
        "gru": (GRUActorCritic, box, {"max_seq_len": 8, "hidden_size": 64}),
    }


def _build(name: str, init: dict, seed: int = 0) -> nn.Module:
    module_class, space, config = _cases()[name]
    torch.manual_seed(seed)
    spec = RLModuleSpec(
        module_class=module_class,
        observation_space=space,
        action_space=ACT3,
        model_config=config | init,
    )
    return spec.build()


def _trunk(module: nn.Module) -> list[tuple[str, nn.Parameter, nn.Module]]:
    """(name, parameter, owning module) for every trunk parameter (not pi / vf / *_head)."""
    owners = dict(module.named_modules())
    out = []
    for name, parameter in module.named_parameters():
        if name.startswith(("pi.", "vf.")) or "_head." in name:
            continue
        owner = owners[name.rsplit(".", 1)[0]]
        out.append((name, parameter, owner))
    return out


@pytest.mark.parametrize("name", ["paper_transformer", "stateful_transformer", "mlp", "gru"])
def test_normal_scheme_gives_the_stated_statistics(name):
    module = _build(name, {"init": "normal", "init_std": 0.05})
    assert module.init.init == "normal" and module.init.init_std == 0.05
    weights = []
    for pname, parameter, owner in _trunk(module):
        leaf = pname.rsplit(".", 1)[-1]
        if isinstance(owner, nn.LayerNorm):
            expected = 1.0 if leaf == "weight" else 0.0
            assert torch.all(parameter == expected), pname
        elif leaf.startswith("bias"):
            assert torch.all(parameter == 0), pname
        else:
            weights.append(parameter.detach().flatten())
            if parameter.numel() >= 2000:  # each large matrix on its own
                assert abs(parameter.std().item() - 0.05) < 0.005, pname
                assert abs(parameter.mean().item()) < 0.005, pname
    pooled = torch.cat(weights)
    assert pooled.numel() > 4000
    assert abs(pooled.std().item() - 0.05) < 0.002
    assert abs(pooled.mean().item()) < 0.003


@pytest.mark.parametrize("name", ["paper_transformer", "stateful_transformer"])
def test_normal_scheme_builds_the_transformer_input_projection_without_a_bias(name):
    default = _build(name, {})
    normal = _build(name, {"init": "normal"})
    assert default.transformer.embed.bias is not None
    assert normal.transformer.embed.bias is None
    assert normal.init.init_std == 0.02
    d = 64 if name == "paper_transformer" else 32
    count = sum(p.numel() for p in default.parameters())
    assert sum(p.numel() for p in normal.parameters()) == count - d
    if name == "paper_transformer":
        assert count == 143_204  # the paper's transformer as before (test_transformer_options)


def test_torch_default_scheme_is_pytorch_default_and_heads_keep_their_init():
    """Default trunk: PyTorch's Linear init (uniform in +-1/sqrt(fan_in): std 1/sqrt(3 fan_in)),
    biases not zero; heads under "normal" keep PyTorch's init (not N(0, std))."""
    module = _build("mlp", {})
    first = module.encoder.net[0]  # Linear(5, 64)
    bound = 1 / np.sqrt(5)
    assert first.weight.abs().max() <= bound and first.weight.std() > 0.15
    assert first.bias.abs().max() > 0
    normal = _build("mlp", {"init": "normal", "head_hidden_sizes": [32]})
    hidden = normal.pi.net[0]  # the head's hidden layer: PyTorch's init, untouched
    assert hidden.weight.std() > 0.05 and hidden.bias.abs().max() > 0


def test_defaults_are_the_old_init_bit_for_bit():
    """No init key, and the four keys stated at their defaults, give the same weights as the
    library before the keys existed: PyTorch's init, policy output x 0.01, value output x 1,
    both output biases 0 (a hand-built copy of the old setup under the same seed)."""
    implicit = _build("paper_transformer", {})
    explicit = _build(
        "paper_transformer",
        {"init": "torch_default", "pi_output_scale": 0.01, "vf_output_scale": 1.0},
    )
    for (name, a), (_, b) in zip(
        implicit.state_dict().items(), explicit.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    # The old setup: trunk, then MLPHead(output_scale=0.01), then MLPHead() in this order.
    torch.manual_seed(0)
    from rl_harness.learners.components import CausalTransformerEncoder

    CausalTransformerEncoder(
        input_dim=3,
        context_len=10,
        d_model=64,
        num_heads=1,
        num_layers=4,
        ff_dim=256,
        d_head=8,
        activation="relu",
    )
    pi = MLPHead(64, 3, (), "tanh", output_scale=0.01)
    vf = MLPHead(64, 1, (), "tanh")
    assert torch.equal(implicit.pi.net[-1].weight, pi.net[-1].weight)
    assert torch.equal(implicit.vf.net[-1].weight, vf.net[-1].weight)
    assert implicit.init.to_dict() == {
        "init": "torch_default",
        "init_std": None,
        "pi_output_scale": 0.01,
        "vf_output_scale": 1.0,
    }


def test_output_scales_scale_the_heads_last_layer():
    base = _build("mlp", {"pi_output_scale": 1.0, "vf_output_scale": 1.0}, seed=3)
    scaled = _build("mlp", {"pi_output_scale": 0.5, "vf_output_scale": 4.0}, seed=3)
    assert torch.allclose(scaled.pi.net[-1].weight, 0.5 * base.pi.net[-1].weight)
    assert torch.allclose(scaled.vf.net[-1].weight, 4.0 * base.vf.net[-1].weight)
    assert torch.all(scaled.pi.net[-1].bias == 0) and torch.all(scaled.vf.net[-1].bias == 0)
    # Same for the original study's transformer: trunk normal, heads at scale 1.
    original = _build("paper_transformer", ORIGINAL, seed=3)
    assert original.pi.net[-1].weight.std() > 0.03  # PyTorch's init: std 1/sqrt(3 * 64) = 0.072


def test_aux_heads_keep_pytorch_init_under_normal():
    torch.manual_seed(0)
    module = RLModuleSpec(
        module_class=_AuxTransformer,
        observation_space=_token_space(),
        action_space=ACT3,
        model_config=PAPER_CONFIG | ORIGINAL | {"next_token_aux/num_classes": 3},
    ).build()
    head = module.next_token_aux_head.net[-1]
    assert head.weight.std() > 0.03  # not N(0, 0.02)
    assert module.transformer.blocks[0].mlp[0].weight.std() < 0.021


@pytest.mark.parametrize(
    ("init", "match"),
    [
        ({"init": "nromal"}, "'init'"),
        ({"init": "xavier"}, "'init'"),
        ({"init_std": 0.02}, "'init_std'"),  # a std without the normal scheme
        ({"init": "torch_default", "init_std": 0.1}, "'init_std'"),
        ({"init": "normal", "init_std": 0}, "'init_std'"),
        ({"init": "normal", "init_std": -0.02}, "'init_std'"),
        ({"init": "normal", "init_std": "0.02"}, "'init_std'"),
        ({"pi_output_scale": 0.0}, "'pi_output_scale'"),
        ({"pi_output_scale": float("nan")}, "'pi_output_scale'"),
        ({"vf_output_scale": True}, "'vf_output_scale'"),
        ({"vf_output_scale": -1.0}, "'vf_output_scale'"),
        ({"init_sdt": 0.02}, "'init_sdt'"),  # a typo in a key: unknown, named
        ({"pi_scale": 1.0}, "'pi_scale'"),
    ],
)
@pytest.mark.parametrize("name", ["paper_transformer", "gru"])
def test_bad_init_is_refused_naming_the_key(name, init, match):
    with pytest.raises(ValueError, match=match):
        _build(name, init)


def test_resolved_init_fills_defaults_without_building():
    assert TransformerActorCritic.resolved_init({"init": "normal"}) == {
        "init": "normal",
        "init_std": 0.02,
        "pi_output_scale": 0.01,
        "vf_output_scale": 1.0,
    }
    assert MLPActorCritic.resolved_init(None)["init"] == "torch_default"


def test_config_json_of_a_real_run_records_the_resolved_init(ray_session, tmp_path):
    """A real (tiny) PPO run through the harness: config.json's module.init holds the
    resolved initialisation, defaults filled in, beside the model_config as given."""
    from ray.rllib.algorithms.ppo import PPOConfig

    from rl_harness import make_context, run_algorithm

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=MLPActorCritic,
                model_config={"hidden_sizes": [8], "init": "normal"},
            )
        )
    )
    context = make_context(tmp_path, seed=0, smoke=True)
    run_algorithm(config, context, stop=1)
    record = json.loads((context.results_dir / "config.json").read_text())
    assert record["module"]["model_config"] == {"hidden_sizes": [8], "init": "normal"}
    assert record["module"]["init"] == {
        "init": "normal",
        "init_std": 0.02,
        "pi_output_scale": 0.01,
        "vf_output_scale": 1.0,
    }

"""The optimizer factory and its config reading."""

from __future__ import annotations

import pytest
import torch

from rl_harness.learners.optimizer import make_optimizer, optimizer_settings


def test_make_optimizer_by_name_with_kwargs():
    params = [torch.nn.Parameter(torch.ones(3))]
    opt = make_optimizer(params, "adamw", weight_decay=0.1, betas=[0.8, 0.9])
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.defaults["weight_decay"] == 0.1 and opt.defaults["betas"] == (0.8, 0.9)
    # Decoupled weight decay shrinks a parameter even with a zero gradient.
    params[0].grad = torch.zeros(3)
    opt.step()
    assert (params[0].detach() < 1.0).all()


def test_make_optimizer_errors_are_explained():
    params = [torch.nn.Parameter(torch.ones(3))]
    with pytest.raises(ValueError, match="unknown optimizer 'lion'"):
        make_optimizer(params, "lion")
    with pytest.raises(ValueError, match="bad kwargs for optimizer 'sgd'"):
        make_optimizer(params, "sgd", betas=(0.9, 0.99))


def test_optimizer_settings_defaults_and_validation():
    assert optimizer_settings({}) == ("adam", {})
    config = {"optimizer/name": "sgd", "optimizer/kwargs": {"momentum": 0.9}}
    assert optimizer_settings(config) == ("sgd", {"momentum": 0.9})
    with pytest.raises(ValueError, match="must not set 'lr'"):
        optimizer_settings({"optimizer/kwargs": {"lr": 0.1}})
    with pytest.raises(ValueError, match="optimizer/kwargs"):
        optimizer_settings({"optimizer/kwargs": [("momentum", 0.9)]})


def _names(module, params) -> set[str]:
    ids = {id(p) for p in params}
    return {name for name, p in module.named_parameters() if id(p) in ids}


def test_muon_takes_hidden_matrices_and_adamw_the_rest():
    import gymnasium as gym
    import numpy as np

    from rl_harness.learners.models import NextTokenAuxHeadMixin, StatefulTransformerActorCritic
    from rl_harness.learners.optimizer import muon_param_groups

    class Leaf(NextTokenAuxHeadMixin, StatefulTransformerActorCritic):
        pass

    module = Leaf(
        observation_space=gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        action_space=gym.spaces.Discrete(2),
        model_config={
            "max_seq_len": 4,
            "context": 4,
            "d_model": 8,
            "num_heads": 2,
            "num_layers": 2,
            "head_hidden_sizes": [8],
            "next_token_aux/num_classes": 3,
        },
    )
    muon, adamw = muon_param_groups(module)
    expected_muon = {
        f"transformer.blocks.{i}.{w}.weight"
        for i in range(2)
        for w in ("attn.qkv", "attn.out", "mlp.0", "mlp.2")
    }
    assert _names(module, muon) == expected_muon
    all_names = {name for name, _ in module.named_parameters()}
    assert _names(module, adamw) == all_names - expected_muon
    # The embedding, norms, biases and every head (pi, vf, aux) went to AdamW.
    assert {
        "transformer.embed.weight",
        "transformer.norm.weight",
        "transformer.blocks.0.norm1.weight",
        "transformer.blocks.0.attn.qkv.bias",
        "pi.net.0.weight",
        "pi.net.2.weight",
        "vf.net.0.weight",
        "next_token_aux_head.net.0.weight",
    } <= _names(module, adamw)
    assert all(p.ndim == 2 for p in muon)


def test_muon_settings_are_checked():
    from rl_harness.learners.optimizer import adamw_settings

    assert optimizer_settings({"optimizer/name": "muon"}) == ("muon", {})
    assert adamw_settings({"optimizer/adamw_kwargs": {"weight_decay": 0.0}}) == {
        "weight_decay": 0.0
    }
    with pytest.raises(ValueError, match="applies to optimizer 'muon' only"):
        optimizer_settings({"optimizer/name": "adam", "optimizer/adamw_kwargs": {}})
    with pytest.raises(ValueError, match="must not set 'lr'"):
        adamw_settings({"optimizer/adamw_kwargs": {"lr": 0.1}})
    with pytest.raises(ValueError, match="bad kwargs for optimizer 'muon'"):
        make_optimizer([torch.nn.Parameter(torch.ones(2, 2))], "muon", betas=(0.9, 0.9))

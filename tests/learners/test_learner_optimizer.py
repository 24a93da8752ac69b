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

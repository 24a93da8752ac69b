"""A module's initialisation: a recorded model-config choice (trunk scheme, head scales).

model_config keys (read by every ActorCriticRLModule; see `ActorCriticRLModule`):

  "init"             trunk scheme: "torch_default" (default: each layer's PyTorch init; the
                     window transformer's learned positions N(0, 0.02)) or "normal": every
                     trunk weight (Linear, Embedding, GRU matrices, learned positions)
                     N(0, init_std), every trunk bias 0, LayerNorms (1, 0), and the
                     transformers' linear input projection built without a bias (a token
                     embedding has none anyway). The original belief-geometry study's
                     transformers used "normal" with std 0.02.
  "init_std"         the std of "normal" (default 0.02); refused with "torch_default".
  "pi_output_scale"  factor on the policy head's last-layer weights (default 0.01: near-
                     uniform initial policy); the head's hidden layers keep PyTorch's init.
  "vf_output_scale"  the same for the value head (default 1.0).

Both heads' output biases start at 0 under every scheme. The defaults are the library's
initialisation before these keys existed, so earlier runs reproduce bit for bit; a run's
config.json records the resolved values under `module.init` (`resolved_init`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from rl_harness.learners.models.model_config import config_choice, config_positive_float

INIT_SCHEMES = ("torch_default", "normal")
INIT_KEYS = ("init", "init_std", "pi_output_scale", "vf_output_scale")
DEFAULT_INIT_STD = 0.02
DEFAULT_PI_OUTPUT_SCALE = 0.01  # small initial policy logits: PPO starts near uniform
DEFAULT_VF_OUTPUT_SCALE = 1.0


@dataclasses.dataclass(frozen=True)
class ModuleInit:
    """The resolved initialisation of an ActorCriticRLModule."""

    init: str  # one of INIT_SCHEMES
    init_std: float | None  # the "normal" scheme's std; None for "torch_default"
    pi_output_scale: float
    vf_output_scale: float

    @property
    def input_bias(self) -> bool:
        """Whether a transformer's linear input projection has a bias ("normal": none)."""
        return self.init != "normal"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def module_init(config: Mapping[str, Any]) -> ModuleInit:
    """The initialisation `config` (a model_config) asks for, defaults filled in; one
    ValueError naming the key for an unknown scheme, a bad number, or a std without
    "normal"."""
    scheme = config_choice(config, "init", "torch_default", INIT_SCHEMES)
    std = None
    if scheme == "normal":
        std = config_positive_float(config, "init_std", DEFAULT_INIT_STD)
    elif config.get("init_std") is not None:
        raise ValueError(
            f"model_config['init_std'] = {config['init_std']!r} is only read with "
            "model_config['init'] = 'normal' (the trunk's init is 'torch_default')"
        )
    return ModuleInit(
        init=scheme,
        init_std=std,
        pi_output_scale=config_positive_float(config, "pi_output_scale", DEFAULT_PI_OUTPUT_SCALE),
        vf_output_scale=config_positive_float(config, "vf_output_scale", DEFAULT_VF_OUTPUT_SCALE),
    )


def normal_init_(module: nn.Module, std: float) -> None:
    """Every weight of `module` and its submodules N(0, std), every bias 0; LayerNorms are
    reset to (1, 0). A parameter is a bias when its own name starts with "bias" (Linear's
    `bias`, GRU's `bias_ih_l0`); every other parameter (weights, learned positions) is a
    weight."""
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.LayerNorm):
                sub.reset_parameters()
                continue
            for name, parameter in sub.named_parameters(recurse=False):
                if name.startswith("bias"):
                    parameter.zero_()
                else:
                    parameter.normal_(0.0, std)

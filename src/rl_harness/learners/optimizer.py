"""Optimizers by name + kwargs, and their settings read from a learner_config_dict.

The Learner mixin that builds them, `rl_harness.losses.ConfiguredOptimizerMixin`, reads:

    config.training(lr=3e-4)
    config.learners(
        learner_class=MyLearner,  # class MyLearner(ConfiguredOptimizerMixin, PPOTorchLearner)
        learner_config_dict={
            "optimizer/name": "adamw",
            "optimizer/kwargs": {"weight_decay": 0.01, "betas": [0.9, 0.95]},
        },
    )

The learning rate stays with RLlib (`config.lr`, fixed or scheduled), so it is
not an optimizer kwarg.

Muon (`torch.optim.Muon`) orthogonalizes the updates of 2-D weight matrices, so it
takes only the module's hidden matrices (`module.muon_parameters()`: not the input
embedding, norms, biases or heads); AdamW takes the rest. Two optimizers are
registered per module, "muon" and "adamw", both at `config.lr` (Muon scales its
update to AdamW's RMS by default, `adjust_lr_fn="match_rms_adamw"`, so one lr fits):

    learner_config_dict={
        "optimizer/name": "muon",
        "optimizer/kwargs": {"momentum": 0.95, "weight_decay": 0.01},  # Muon's
        "optimizer/adamw_kwargs": {"weight_decay": 0.0},                # AdamW's
    }
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}

NAME_KEY = "optimizer/name"
KWARGS_KEY = "optimizer/kwargs"
ADAMW_KWARGS_KEY = "optimizer/adamw_kwargs"
MUON = "muon"
MUON_DEFAULTS: dict[str, Any] = {"adjust_lr_fn": "match_rms_adamw"}


def make_optimizer(
    params: Iterable[torch.Tensor], name: str, **kwargs: Any
) -> torch.optim.Optimizer:
    """`OPTIMIZERS[name](params, **kwargs)`; lists in kwargs become tuples (JSON configs).

    For Muon over a whole module use `muon_param_groups` + two optimizers instead.
    """
    if name == MUON:
        return _build(torch.optim.Muon, name, params, MUON_DEFAULTS | kwargs)
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted([*OPTIMIZERS, MUON])}")
    return _build(OPTIMIZERS[name], name, params, kwargs)


def muon_param_groups(
    module: torch.nn.Module,
) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    """(Muon's params, AdamW's params): the module's `muon_parameters()` and the rest."""
    muon_parameters = getattr(module, "muon_parameters", None)
    if muon_parameters is None:
        raise ValueError(
            f"optimizer 'muon' needs a module with muon_parameters() (an rl_harness "
            f"ActorCriticRLModule); {type(module).__name__} has none"
        )
    muon: list[torch.nn.Parameter] = list(muon_parameters())
    chosen = {id(p) for p in muon}
    rest = [p for p in module.parameters() if p.requires_grad and id(p) not in chosen]
    return [p for p in muon if p.requires_grad], rest


def _build(
    cls: type[torch.optim.Optimizer],
    name: str,
    params: Iterable[torch.Tensor],
    kwargs: dict[str, Any],
) -> torch.optim.Optimizer:
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    try:
        return cls(params, **kwargs)
    except TypeError as err:  # an unknown kwarg
        raise ValueError(f"bad kwargs for optimizer {name!r}: {err}") from err


def _kwargs(learner_config_dict: Mapping[str, Any], key: str) -> dict[str, Any]:
    kwargs = learner_config_dict.get(key, {})
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"learner_config_dict[{key!r}] must be a dict, got {kwargs!r}")
    if "lr" in kwargs:
        raise ValueError(
            f"learner_config_dict[{key!r}] must not set 'lr': "
            "use config.training(lr=...) so RLlib's lr schedule applies"
        )
    return dict(kwargs)


def optimizer_settings(learner_config_dict: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, kwargs) from `learner_config_dict`; defaults to ("adam", {})."""
    name = learner_config_dict.get(NAME_KEY, "adam")
    if not isinstance(name, str):
        raise ValueError(f"learner_config_dict[{NAME_KEY!r}] must be a str, got {name!r}")
    if ADAMW_KWARGS_KEY in learner_config_dict and name != MUON:
        raise ValueError(
            f"learner_config_dict[{ADAMW_KWARGS_KEY!r}] applies to optimizer 'muon' only "
            f"(the AdamW for non-matrix parameters); the optimizer is {name!r}"
        )
    return name, _kwargs(learner_config_dict, KWARGS_KEY)


def adamw_settings(learner_config_dict: Mapping[str, Any]) -> dict[str, Any]:
    """The kwargs of Muon's companion AdamW (`optimizer/adamw_kwargs`, default {})."""
    return _kwargs(learner_config_dict, ADAMW_KWARGS_KEY)

"""Optimizers by name + kwargs, and a Learner mixin that builds one from config.

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}

NAME_KEY = "optimizer/name"
KWARGS_KEY = "optimizer/kwargs"


def make_optimizer(
    params: Iterable[torch.nn.Parameter], name: str, **kwargs: Any
) -> torch.optim.Optimizer:
    """`OPTIMIZERS[name](params, **kwargs)`; lists in kwargs become tuples (JSON configs)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {sorted(OPTIMIZERS)}")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    try:
        return OPTIMIZERS[name](params, **kwargs)
    except TypeError as err:  # an unknown kwarg
        raise ValueError(f"bad kwargs for optimizer {name!r}: {err}") from err


def optimizer_settings(learner_config_dict: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, kwargs) from `learner_config_dict`; defaults to ("adam", {})."""
    name = learner_config_dict.get(NAME_KEY, "adam")
    kwargs = learner_config_dict.get(KWARGS_KEY, {})
    if not isinstance(name, str):
        raise ValueError(f"learner_config_dict[{NAME_KEY!r}] must be a str, got {name!r}")
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"learner_config_dict[{KWARGS_KEY!r}] must be a dict, got {kwargs!r}")
    if "lr" in kwargs:
        raise ValueError(
            f"learner_config_dict[{KWARGS_KEY!r}] must not set 'lr': "
            "use config.training(lr=...) so RLlib's lr schedule applies"
        )
    return name, dict(kwargs)


class ConfiguredOptimizerMixin:
    """Learner mixin: one optimizer per module from `optimizer/name` + `optimizer/kwargs`.

    Compose before a TorchLearner, e.g.
    `class MyLearner(ConfiguredOptimizerMixin, PPOTorchLearner)`.
    """

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        name, kwargs = optimizer_settings(config.learner_config_dict)
        params = self.get_parameters(self.module[module_id])  # type: ignore[attr-defined]
        self.register_optimizer(  # type: ignore[attr-defined]
            module_id=module_id,
            optimizer=make_optimizer(params, name, **kwargs),
            params=params,
            lr_or_lr_schedule=config.lr,
        )

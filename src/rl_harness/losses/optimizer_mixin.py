"""A Learner mixin that builds each module's optimizer from the learner_config_dict.

    class MyLearner(ConfiguredOptimizerMixin, PPOTorchLearner): ...

    config.learners(
        learner_class=MyLearner,
        learner_config_dict={"optimizer/name": "adamw", "optimizer/kwargs": {...}},
    )

The names, kwargs and Muon's parameter split are `rl_harness.learners.optimizer`'s (its
docstring lists the keys); the learning rate stays `config.lr`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.utils.annotations import override

from rl_harness.learners.optimizer import (
    MUON,
    adamw_settings,
    make_optimizer,
    muon_param_groups,
    optimizer_settings,
)

# To mypy the mixin is the TorchLearner it is composed with (its super() calls and the
# attributes it reads are TorchLearner's); at run time it is a plain mixin.
if TYPE_CHECKING:
    _LearnerBase = TorchLearner
else:
    _LearnerBase = object


class ConfiguredOptimizerMixin(_LearnerBase):
    """Learner mixin: one optimizer per module from `optimizer/name` + `optimizer/kwargs`
    (Muon: two, "muon" on the hidden matrices and "adamw" on the rest).

    Compose before a TorchLearner, e.g.
    `class MyLearner(ConfiguredOptimizerMixin, PPOTorchLearner)`.
    """

    @override(TorchLearner)
    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        name, kwargs = optimizer_settings(config.learner_config_dict)
        module = self.module[module_id]
        if name != MUON:
            params = self.get_parameters(module)
            self.register_optimizer(
                module_id=module_id,
                optimizer=make_optimizer(params, name, **kwargs),
                params=params,
                lr_or_lr_schedule=config.lr,
            )
            return
        torch_module = getattr(module, "unwrapped", lambda: module)()  # DDP-wrapped or not
        if not isinstance(torch_module, torch.nn.Module):
            raise TypeError(f"optimizer 'muon' needs a torch module, got {type(module).__name__}")
        matrices, rest = muon_param_groups(torch_module)
        adamw_kwargs = adamw_settings(config.learner_config_dict)
        for group, params, optimizer in (
            (MUON, matrices, make_optimizer(matrices, MUON, **kwargs)),
            ("adamw", rest, make_optimizer(rest, "adamw", **adamw_kwargs)),
        ):
            self.register_optimizer(
                module_id=module_id,
                optimizer_name=group,
                optimizer=optimizer,
                params=params,
                lr_or_lr_schedule=config.lr,
            )

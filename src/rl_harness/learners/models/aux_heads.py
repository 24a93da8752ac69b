"""Head mixins: extra classifier outputs in `_forward_train` under a namespace.

Compose before the module class, e.g.
`class Leaf(NextTokenAuxHeadMixin, GRUActorCritic): ...`. Each head reads the
module's representation (`Columns.EMBEDDINGS` of `_forward_train`, width
`representation_dim`), so it works on any ActorCriticRLModule. Heads only run
in training forward passes; acting never pays for them. They keep PyTorch's init under every
"init" scheme (the scheme initialises the trunk only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.annotations import override
from torch import nn

from rl_harness.learners.aux_keys import NEXT_TOKEN_AUX, STATE_AUX, AuxKeys
from rl_harness.learners.components import ACTIVATIONS, MLPHead
from rl_harness.learners.models.model_config import config_choice, config_int, config_sizes


def build_aux_head(module: Any, keys: AuxKeys) -> nn.Module:
    """A classifier head sized from the module's model_config under `keys`."""
    width = getattr(module, "representation_dim", None)
    if not isinstance(width, int):
        raise TypeError(
            f"{keys.namespace} head needs a module with an int `representation_dim` "
            f"(an ActorCriticRLModule); {type(module).__name__} has none"
        )
    config = module.model_config or {}
    return MLPHead(
        width,
        config_int(config, keys.num_classes),
        config_sizes(config, keys.hidden_sizes, (), allow_empty=True),
        config_choice(config, "activation", "tanh", ACTIVATIONS),
    )


def add_aux_logits(out: dict[str, Any], keys: AuxKeys, head: nn.Module) -> dict[str, Any]:
    if Columns.EMBEDDINGS not in out:
        raise KeyError(
            f"{keys.namespace} head needs `{Columns.EMBEDDINGS}` in the module's "
            "_forward_train output"
        )
    out[keys.logits] = head(out[Columns.EMBEDDINGS])
    return out


# To mypy the mixin is the RLModule it is composed with (its super() calls and the
# attributes it reads are RLModule's); at run time it is a plain mixin.
if TYPE_CHECKING:
    _ModuleBase = RLModule
else:
    _ModuleBase = object


class NextTokenAuxHeadMixin(_ModuleBase):
    """Adds `next_token_aux/logits` (..., num_classes) from the representation.

    model_config: "next_token_aux/num_classes" (required),
    "next_token_aux/hidden_sizes" (default []).
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = (
        NEXT_TOKEN_AUX.num_classes,
        NEXT_TOKEN_AUX.hidden_sizes,
    )

    @override(RLModule)
    def setup(self) -> None:
        super().setup()  # type: ignore[no-untyped-call]  # RLlib's setup is unannotated
        self.next_token_aux_head = build_aux_head(self, NEXT_TOKEN_AUX)

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        out = super()._forward_train(batch, **kwargs)
        return add_aux_logits(out, NEXT_TOKEN_AUX, self.next_token_aux_head)


class StateAuxHeadMixin(_ModuleBase):
    """Adds `state_aux/logits` (..., num_classes) from the representation.

    model_config: "state_aux/num_classes" (required), "state_aux/hidden_sizes"
    (default []).
    """

    MODEL_CONFIG_KEYS: ClassVar[tuple[str, ...]] = (STATE_AUX.num_classes, STATE_AUX.hidden_sizes)

    @override(RLModule)
    def setup(self) -> None:
        super().setup()  # type: ignore[no-untyped-call]  # RLlib's setup is unannotated
        self.state_aux_head = build_aux_head(self, STATE_AUX)

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        out = super()._forward_train(batch, **kwargs)
        return add_aux_logits(out, STATE_AUX, self.state_aux_head)

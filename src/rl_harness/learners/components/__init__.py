"""Pure-PyTorch building blocks (no RLlib import): encoders and heads."""

from rl_harness.learners.components.gru import GRUEncoder
from rl_harness.learners.components.heads import MLPHead
from rl_harness.learners.components.mlp import ACTIVATIONS, MLPEncoder, make_activation
from rl_harness.learners.components.stateful_transformer import StatefulTransformerEncoder
from rl_harness.learners.components.transformer import CausalTransformerEncoder

__all__ = [
    "ACTIVATIONS",
    "CausalTransformerEncoder",
    "GRUEncoder",
    "MLPEncoder",
    "MLPHead",
    "StatefulTransformerEncoder",
    "make_activation",
]

"""Transformer values, not just shapes: a hand-written reference forward pass, causality in
both input modes, and the window model reading its whole window in order."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ray.rllib.core.columns import Columns

from rl_harness.learners.components import CausalTransformerEncoder
from rl_harness.learners.models import TransformerActorCritic


def reference_forward(enc: CausalTransformerEncoder, x: torch.Tensor) -> torch.Tensor:
    """Pre-norm causal attention written out: h += Attn(LN1 h); h += W2 gelu(W1 LN2 h)."""
    h = enc.embed(x) + enc.position[: x.shape[1]]
    batch, width, d = h.shape
    future = torch.triu(torch.ones(width, width, dtype=torch.bool), diagonal=1)
    for layer in enc.layers.layers:
        attn = layer.self_attn
        heads = attn.num_heads
        q, k, v = F.linear(layer.norm1(h), attn.in_proj_weight, attn.in_proj_bias).chunk(3, -1)
        q, k, v = (t.reshape(batch, width, heads, d // heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        mixed = (weights @ v).transpose(1, 2).reshape(batch, width, d)
        h = h + attn.out_proj(mixed)
        h = h + layer.linear2(F.gelu(layer.linear1(layer.norm2(h))))
    return enc.norm(h)


@pytest.mark.parametrize("token_input", [False, True])
def test_forward_matches_the_written_out_reference(token_input):
    torch.manual_seed(1)
    enc = CausalTransformerEncoder(
        input_dim=5, context_len=6, d_model=16, num_heads=4, num_layers=2, token_input=token_input
    ).eval()
    x = torch.randint(0, 5, (3, 6)) if token_input else torch.randn(3, 6, 5)
    with torch.no_grad():
        torch.testing.assert_close(enc(x), reference_forward(enc, x), rtol=1e-5, atol=1e-5)
        # A shorter window uses the first positions' embeddings.
        torch.testing.assert_close(
            enc(x[:, :4]), reference_forward(enc, x[:, :4]), rtol=1e-5, atol=1e-5
        )


def test_a_single_position_attends_only_to_itself():
    # Softmax over one key is 1: the attention output is out_proj(v) of that position,
    # so a one-step window equals the first step of any longer window starting with it.
    torch.manual_seed(2)
    enc = CausalTransformerEncoder(input_dim=3, context_len=5, d_model=8, num_heads=2).eval()
    x = torch.randn(4, 5, 3)
    with torch.no_grad():
        torch.testing.assert_close(enc(x[:, :1])[:, 0], enc(x)[:, 0])


def test_token_input_is_causal_at_every_position():
    torch.manual_seed(3)
    enc = CausalTransformerEncoder(
        input_dim=4, context_len=6, d_model=16, num_heads=2, token_input=True
    ).eval()
    x = torch.randint(0, 4, (2, 6))
    with torch.no_grad():
        base = enc(x)
        for t in range(6):
            changed = x.clone()
            changed[:, t] = (changed[:, t] + 1) % 4
            out = enc(changed)
            torch.testing.assert_close(out[:, :t], base[:, :t])  # the past is untouched
            assert (out[:, t:] - base[:, t:]).abs().amax(dim=-1).min() > 1e-4  # the rest moves


def test_window_model_reads_every_step_of_its_window_in_order():
    window = gym.spaces.Box(0.0, 1.0, (5, 3), np.float32)
    torch.manual_seed(4)
    module = TransformerActorCritic(
        observation_space=window, action_space=gym.spaces.Discrete(3), model_config={"d_model": 16}
    ).eval()
    obs = torch.rand(2, 5, 3)
    with torch.no_grad():
        base = module.encode({Columns.OBS: obs})
        oldest = obs.clone()
        oldest[:, 0] = torch.rand(2, 3)  # the oldest step still reaches the encoding
        assert (module.encode({Columns.OBS: oldest}) - base).abs().amax(dim=-1).min() > 1e-4
        reversed_order = obs.flip(1)  # same steps, other order: positions matter
        assert (module.encode({Columns.OBS: reversed_order}) - base).abs().amax() > 1e-4
        # Batch rows are independent: a row's encoding does not depend on its neighbours.
        torch.testing.assert_close(module.encode({Columns.OBS: obs[1:]}), base[1:])

"""Transformer values, not just shapes: a hand-written reference forward pass, causality in
both input modes, and the window model reading its whole window in order."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from rl_harness.learners.components import CausalTransformerEncoder
from rl_harness.learners.models import TransformerActorCritic


def reference_forward(enc: CausalTransformerEncoder, x: torch.Tensor) -> torch.Tensor:
    """Pre-norm causal attention written out: h += Attn(LN1 h); h += W2 act(W1 LN2 h), with
    heads of width d_head, learned or rotary positions and an optional final norm."""
    h = enc.embed(x)
    batch, width, _ = h.shape
    if enc.position is not None:
        h = h + enc.position[:width]
    heads, d_head = enc.num_heads, enc.d_head
    future = torch.triu(torch.ones(width, width, dtype=torch.bool), diagonal=1)
    # Rotary: the pair (i, i + d_head/2) at position p turns by p * base^(-2i/d_head).
    angle = torch.arange(width)[:, None] * enc.rope_base ** (-torch.arange(0, d_head, 2) / d_head)

    def rotated(t: torch.Tensor) -> torch.Tensor:
        first, second = t[..., : d_head // 2], t[..., d_head // 2 :]
        cos, sin = angle.cos(), angle.sin()
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)

    for block in enc.blocks:
        q, k, v = block.attn.qkv(block.norm1(h)).chunk(3, -1)
        q, k, v = (t.reshape(batch, width, heads, d_head).transpose(1, 2) for t in (q, k, v))
        if enc.positions == "rotary":
            q, k = rotated(q), rotated(k)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d_head)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        mixed = (weights @ v).transpose(1, 2).reshape(batch, width, heads * d_head)
        h = h + block.attn.out(mixed)
        first, act, second = block.mlp
        h = h + second(act(first(block.norm2(h))))
    return h if enc.norm is None else enc.norm(h)


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


@pytest.mark.parametrize(
    "options",
    [
        {"d_head": 3, "activation": "relu"},  # 2 heads of 3 in a width of 16
        {"d_head": 8, "num_heads": 1, "positions": "rotary"},
        {"positions": "rotary", "final_norm": False, "activation": "relu"},
        {"d_head": 6, "num_heads": 3, "final_norm": False},
    ],
)
def test_options_match_the_written_out_reference(options):
    torch.manual_seed(5)
    args = {"input_dim": 4, "context_len": 7, "d_model": 16, "num_heads": 2, "num_layers": 3}
    enc = CausalTransformerEncoder(**(args | options)).eval()
    x = torch.randn(3, 7, 4)
    with torch.no_grad():
        torch.testing.assert_close(enc(x), reference_forward(enc, x), rtol=1e-5, atol=1e-5)


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

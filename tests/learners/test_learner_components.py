"""Shapes and behaviour of the pure-torch components."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from rl_harness.learners.components import (
    CausalTransformerEncoder,
    GRUEncoder,
    MLPEncoder,
    MLPHead,
)


def test_mlp_encoder_shapes_and_leading_dims():
    enc = MLPEncoder(5, [8, 6], activation="relu")
    assert enc.output_dim == 6
    assert enc(torch.randn(3, 5)).shape == (3, 6)
    assert enc(torch.randn(2, 4, 5)).shape == (2, 4, 6)
    # relu on the last layer: a representation, never negative.
    assert (enc(torch.randn(50, 5)) >= 0).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"input_dim": 0, "hidden_sizes": [4]}, "input_dim"),
        ({"input_dim": 3, "hidden_sizes": []}, "hidden_sizes"),
        ({"input_dim": 3, "hidden_sizes": [4, -1]}, "hidden_sizes"),
        ({"input_dim": 3, "hidden_sizes": [4], "activation": "swish"}, "activation"),
    ],
)
def test_mlp_encoder_rejects_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MLPEncoder(**kwargs)


def test_mlp_encoder_rejects_wrong_input_width():
    with pytest.raises(ValueError, match="last dim 5"):
        MLPEncoder(5, [4])(torch.randn(2, 4))


def test_mlp_head_shapes_and_output_scale():
    head = MLPHead(6, 3, hidden_sizes=[8], output_scale=0.01)
    assert head(torch.randn(4, 6)).shape == (4, 3)
    plain, small = MLPHead(6, 3), MLPHead(6, 3, output_scale=0.01)
    assert small.net[-1].weight.abs().max() < plain.net[-1].weight.abs().max()
    assert (small.net[-1].bias == 0).all()


def test_gru_encoder_shapes_and_state_layout():
    gru = GRUEncoder(4, 8, num_layers=2)
    out, h = gru(torch.randn(3, 5, 4))
    assert out.shape == (3, 5, 8)
    assert h.shape == (3, 2, 8)
    # The last output is the top layer's final hidden state.
    torch.testing.assert_close(out[:, -1], h[:, -1])


def test_gru_encoder_stepwise_equals_whole_sequence():
    torch.manual_seed(0)
    gru = GRUEncoder(4, 8)
    x = torch.randn(2, 6, 4)
    whole, h_whole = gru(x)
    state, steps = None, []
    for t in range(6):
        out, state = gru(x[:, t : t + 1], state)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), whole)
    torch.testing.assert_close(state, h_whole)


def test_gru_encoder_rejects_bad_state():
    gru = GRUEncoder(4, 8)
    with pytest.raises(ValueError, match="state"):
        gru(torch.randn(2, 3, 4), torch.zeros(2, 8))


def test_transformer_shapes_feature_and_token_inputs():
    feat = CausalTransformerEncoder(input_dim=3, context_len=6, d_model=16, num_heads=2)
    assert feat(torch.randn(4, 6, 3)).shape == (4, 6, 16)
    assert feat.last_position(torch.randn(4, 6, 3)).shape == (4, 16)
    tok = CausalTransformerEncoder(
        input_dim=5, context_len=6, d_model=16, num_heads=4, token_input=True
    )
    assert tok.last_position(torch.randint(0, 5, (4, 6))).shape == (4, 16)


def test_transformer_is_causal():
    torch.manual_seed(0)
    enc = CausalTransformerEncoder(input_dim=3, context_len=6, d_model=16, num_heads=2).eval()
    x = torch.randn(2, 6, 3)
    y = x.clone()
    y[:, 4:] = torch.randn(2, 2, 3)  # change only the last two positions
    out_x, out_y = enc(x), enc(y)
    torch.testing.assert_close(out_x[:, :4], out_y[:, :4])
    assert not torch.allclose(out_x[:, -1], out_y[:, -1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d_model": 10, "num_heads": 4}, "divisible"),
        ({"dropout": 1.0}, "dropout"),
        ({"context_len": 0}, "context_len"),
    ],
)
def test_transformer_rejects_bad_config(kwargs, match):
    args = {"input_dim": 3, "context_len": 4, "d_model": 16, "num_heads": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        CausalTransformerEncoder(**args)


def test_transformer_rejects_too_long_window():
    enc = CausalTransformerEncoder(input_dim=3, context_len=4, d_model=8, num_heads=2)
    with pytest.raises(ValueError, match="exceeds context_len"):
        enc(torch.randn(1, 5, 3))


def test_components_import_no_rllib():
    code = (
        "import sys, rl_harness.learners.components; "
        "print(any(m.startswith('ray') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

"""The window transformer's options (issue 29): head width, MLP activation, learned or rotary
positions, final norm, a strict window read newest-first observations, the residual stream
at every depth, and the belief-geometry paper's configuration."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from rl_harness.envs.hmm import HMMEnv
from rl_harness.learners.components import CausalTransformerEncoder
from rl_harness.learners.components.transformer import rotary_tables, rotate_pairs
from rl_harness.learners.models import TransformerActorCritic
from tests.learners.paper_model import ACT3, PAPER_CONFIG


def _token_env_space(token_window: int) -> gym.Space:
    """The HMM env's own observation space for a MESS3 token window (newest first)."""
    env = HMMEnv(
        {
            "model": "rl_harness.envs.mess3:mess3_model",
            "model_kwargs": {"x": 0.05, "alpha": 0.85},
            "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
            "token_window": token_window,
        }
    )
    return env.observation_space


def _one_hot_windows(tokens: torch.Tensor) -> torch.Tensor:
    """(B, W) tokens, newest first, -1 for none -> the env's flat one-hot (B, W * 3)."""
    hot = torch.nn.functional.one_hot(tokens.clamp(min=0), 3).float()
    return (hot * (tokens >= 0)[..., None]).reshape(tokens.shape[0], -1)


def test_head_width_is_independent_of_width_and_heads():
    enc = CausalTransformerEncoder(input_dim=3, context_len=5, d_model=12, num_heads=2, d_head=5)
    block = enc.blocks[0]
    assert block.attn.qkv.weight.shape == (3 * 2 * 5, 12)
    assert block.attn.out.weight.shape == (12, 2 * 5)
    out = enc.forward_residuals(torch.randn(4, 5, 3))
    assert list(out) == ["embed", "block_1", "block_2", "final_norm"]
    assert all(value.shape == (4, 5, 12) for value in out.values())


def test_rotary_scores_depend_on_relative_position_only():
    # The first block's attention logits from the module's own projection and rotation:
    # the same query and key contents shifted together by s positions give the same logit.
    torch.manual_seed(0)
    enc = CausalTransformerEncoder(
        input_dim=4, context_len=12, d_model=16, num_heads=2, d_head=8, positions="rotary"
    )
    assert enc.position is None  # no absolute position table at all
    block = enc.blocks[0]
    x = torch.randn(1, 12, 4)
    with torch.no_grad():
        h = block.norm1(enc.embed(x))
        q, k, _ = (t.view(1, 12, 2, 8).transpose(1, 2) for t in block.attn.qkv(h).chunk(3, -1))
        cos, sin = rotary_tables(12, 8, enc.rope_base, x.device)
        # Put the contents of positions (p, r) at (p + s, r + s) and compare the logits.
        p, r = 5, 2
        for s in (1, 3, 6):
            shifted_q = torch.zeros_like(q)
            shifted_k = torch.zeros_like(k)
            shifted_q[:, :, p + s], shifted_k[:, :, r + s] = q[:, :, p], k[:, :, r]
            here = (rotate_pairs(q, cos, sin)[:, :, p] * rotate_pairs(k, cos, sin)[:, :, r]).sum(-1)
            there = (
                rotate_pairs(shifted_q, cos, sin)[:, :, p + s]
                * rotate_pairs(shifted_k, cos, sin)[:, :, r + s]
            ).sum(-1)
            torch.testing.assert_close(here, there, rtol=1e-5, atol=1e-5)
        # ... and a different offset gives a different logit (the rotation is not trivial).
        moved = torch.zeros_like(k)
        moved[:, :, r - 1] = k[:, :, r]  # the key's content one position further back
        rotated_q = rotate_pairs(q, cos, sin)[:, :, p]
        other = (rotated_q * rotate_pairs(moved, cos, sin)[:, :, r - 1]).sum(-1)
        assert (other - here).abs().max() > 1e-3


def test_rotary_module_reads_order():
    torch.manual_seed(1)
    module = TransformerActorCritic(
        observation_space=gym.spaces.Box(0.0, 1.0, (6, 3), np.float32),
        action_space=ACT3,
        model_config={"d_model": 16, "num_heads": 2, "positions": "rotary"},
    ).eval()
    obs = torch.rand(2, 6, 3)
    with torch.no_grad():
        base = module.encode({Columns.OBS: obs})
        swapped = obs[:, [1, 0, 2, 3, 4, 5]]  # same steps, two older ones swapped
        assert (module.encode({Columns.OBS: swapped}) - base).abs().amax() > 1e-4


def test_the_window_is_strict_on_the_hmm_envs_newest_first_window():
    # The env shows 16 tokens, newest first; the model reads the newest 10.
    space = _token_env_space(16)
    torch.manual_seed(2)
    module = TransformerActorCritic(
        observation_space=space,
        action_space=ACT3,
        model_config={
            "context_len": 16,
            "feature_dim": 3,
            "window": 10,
            "newest_first": True,
            "d_model": 16,
        },
    ).eval()
    tokens = torch.randint(0, 3, (8, 16))
    with torch.no_grad():
        base = module.encode({Columns.OBS: _one_hot_windows(tokens)})
        older = tokens.clone()
        older[:, 10:] = (older[:, 10:] + 1) % 3  # every token older than the window
        torch.testing.assert_close(module.encode({Columns.OBS: _one_hot_windows(older)}), base)
        older[:, 10:] = -1  # or none at all (the start of an episode)
        torch.testing.assert_close(module.encode({Columns.OBS: _one_hot_windows(older)}), base)
        oldest_inside = tokens.clone()
        oldest_inside[:, 9] = (oldest_inside[:, 9] + 1) % 3
        moved = module.encode({Columns.OBS: _one_hot_windows(oldest_inside)})
        assert (moved - base).abs().amax(dim=-1).min() > 1e-5


def test_newest_first_is_the_flipped_window_of_an_oldest_first_model():
    space = gym.spaces.Box(0.0, 1.0, (7, 3), np.float32)
    torch.manual_seed(3)
    newest = TransformerActorCritic(
        observation_space=space,
        action_space=ACT3,
        model_config={"d_model": 16, "window": 5, "newest_first": True},
    ).eval()
    oldest = TransformerActorCritic(
        observation_space=space, action_space=ACT3, model_config={"d_model": 16, "window": 5}
    ).eval()
    oldest.load_state_dict(newest.state_dict())
    obs = torch.rand(4, 7, 3)
    with torch.no_grad():
        torch.testing.assert_close(
            newest.encode({Columns.OBS: obs}), oldest.encode({Columns.OBS: obs.flip(1)})
        )
        # An oldest-first model reads the last 5 positions: the first 2 are older.
        changed = obs.clone()
        changed[:, :2] = torch.rand(4, 2, 3)
        torch.testing.assert_close(
            oldest.encode({Columns.OBS: changed}), oldest.encode({Columns.OBS: obs})
        )


@pytest.mark.parametrize("final_norm", [True, False])
def test_residuals_at_every_depth_and_final_norm_is_what_the_heads_read(final_norm):
    space = _token_env_space(10)
    torch.manual_seed(4)
    module = TransformerActorCritic(
        observation_space=space,
        action_space=ACT3,
        model_config=PAPER_CONFIG | {"num_layers": 3, "final_norm": final_norm},
    ).eval()
    batch = {Columns.OBS: _one_hot_windows(torch.randint(-1, 3, (5, 10)))}
    with torch.no_grad():
        residuals, state_out = module.encode_step_residuals(batch)
        assert state_out == {}
        assert list(residuals) == ["embed", "block_1", "block_2", "block_3", "final_norm"]
        assert all(value.shape == (5, 64) for value in residuals.values())
        representation = residuals["final_norm"]
        assert torch.equal(representation, module.encode(batch))
        logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]
        assert torch.equal(logits, module.pi(representation))
        assert torch.equal(module.compute_values(batch), module.vf(representation).squeeze(-1))
        normed = torch.nn.functional.layer_norm(residuals["block_3"], (64,))
        if final_norm:  # a LayerNorm of the last block (fresh: unit gain, zero bias)
            torch.testing.assert_close(representation, normed)
        else:
            assert torch.equal(representation, residuals["block_3"])
        # Each block moves the stream.
        assert (residuals["block_1"] - residuals["embed"]).abs().amax() > 1e-4


def test_paper_transformer_builds_and_counts_its_parameters():
    module = TransformerActorCritic(
        observation_space=_token_env_space(10), action_space=ACT3, model_config=PAPER_CONFIG
    )
    d, layers, heads, d_head, ff, window, vocab = 64, 4, 1, 8, 256, 10, 3
    per_block = (
        2 * d  # LayerNorm 1
        + d * 3 * heads * d_head
        + 3 * heads * d_head  # q, k, v
        + heads * d_head * d
        + d  # attention out
        + 2 * d  # LayerNorm 2
        + d * ff
        + ff
        + ff * d
        + d  # ReLU MLP
    )
    trunk = vocab * d + d + window * d + layers * per_block + 2 * d  # embed, positions, final LN
    heads_params = (d * 3 + 3) + (d + 1)  # pi (3 tokens), vf
    assert per_block == 35_480
    assert sum(p.numel() for p in module.parameters()) == trunk + heads_params == 143_204
    enc = module.transformer
    assert (enc.d_head, enc.num_heads, enc.num_layers, enc.context_len) == (8, 1, 4, 10)
    assert isinstance(enc.blocks[0].mlp[1], torch.nn.ReLU)
    assert enc.position is not None and enc.norm is not None
    assert module.encode({Columns.OBS: torch.zeros(2, 30)}).shape == (2, 64)


@pytest.mark.parametrize(
    ("model_config", "match"),
    [
        ({"mlp_activation": "tanh"}, "mlp_activation"),
        ({"positions": "sinusoidal"}, "positions"),
        ({"positions": "rotary", "d_head": 5}, "d_head"),
        ({"final_norm": "yes"}, "final_norm"),
        ({"window": 11}, "window"),
        ({"window": 0}, "window"),
        ({"d_head": 0}, "d_head"),
        ({"newest_first": 1}, "newest_first"),
        ({"d_model": 10, "num_heads": 4}, "d_head"),
        ({"head_dim": 8}, "head_dim"),  # unknown key: named, with the accepted ones
    ],
)
def test_bad_options_fail_naming_the_key(model_config, match):
    with pytest.raises(ValueError, match=match):
        TransformerActorCritic(
            observation_space=_token_env_space(10),
            action_space=ACT3,
            model_config={"context_len": 10, "feature_dim": 3} | model_config,
        )


def test_unknown_key_error_lists_the_new_options():
    with pytest.raises(ValueError, match="accepted keys: .*d_head.*final_norm.*mlp_activation"):
        TransformerActorCritic(
            observation_space=_token_env_space(10),
            action_space=ACT3,
            model_config={"context_len": 10, "feature_dim": 3, "n_head_dim": 8},
        )

"""The stateful transformer's passes without autograd (acting, replays) write each step's
keys/values into an arena in place instead of copying the cache into a fresh buffer every
step, and rotate without a concatenation. Both must leave every number as it was: outputs
and caches bit for bit those of the previous code (fresh buffers, `ARENA_STEPS = 0`; the
concatenating rotation), across resets, multi-step calls, two calls from one state, and
without changing any cache handed out earlier."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

import rl_harness.learners.components.stateful_transformer as st


def _previous_rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """The rotation before the arena (what autograd still runs)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * signed_sin


def _encoders(
    context: int = 9,
) -> tuple[st.StatefulTransformerEncoder, st.StatefulTransformerEncoder]:
    torch.manual_seed(0)
    new = st.StatefulTransformerEncoder(
        input_dim=5, context=context, d_model=24, num_heads=3, num_layers=3
    )
    old = copy.deepcopy(new)
    old.ARENA_STEPS = 0  # a fresh buffer of exactly cache + new steps every call: as before
    return new, old


def test_rotation_without_autograd_is_the_concatenating_formula_bit_for_bit():
    encoder, _ = _encoders(context=64)
    cos, sin, _ = encoder._tables_for(1, torch.device("cpu"))
    torch.manual_seed(1)
    keys = torch.randn(32, 64, 3, 8)  # (B, positions, heads, head_dim), as acting's keys
    with torch.no_grad():
        got = st.rotate(keys, cos[1:], sin[1:])
    assert torch.equal(got, _previous_rotate(keys, cos[1:], sin[1:]))
    # The transposed (non-contiguous) view acting rotates gives the same bits too.
    view = torch.randn(32, 3, 64, 8).transpose(1, 2)
    with torch.inference_mode():
        assert torch.equal(
            st.rotate(view, cos[1:], sin[1:]), _previous_rotate(view, cos[1:], sin[1:])
        )
    # With autograd the formula itself runs (and gradients flow).
    leaf = keys.clone().requires_grad_(True)
    st.rotate(leaf, cos[1:], sin[1:]).sum().backward()
    assert leaf.grad is not None and float(leaf.grad.abs().sum()) > 0


@pytest.mark.parametrize("mode", [torch.inference_mode, torch.no_grad])
def test_acting_in_the_arena_equals_fresh_buffers_bit_for_bit(mode, monkeypatch):
    new, old = _encoders()
    batch = 4
    handed_out: list[tuple[torch.Tensor, torch.Tensor]] = []
    in_place = 0
    with mode():
        state_new, state_old = new.initial_state(batch), old.initial_state(batch)
        torch.manual_seed(2)
        for t in range(160):
            steps = 3 if t % 41 == 40 else 1  # a multi-step call now and then
            x = torch.randn(batch, steps, 5)
            arena_before = new._arena
            out_new, state_new = new(x, state_new)
            if arena_before is not None and new._arena is arena_before:
                in_place += 1
            with monkeypatch.context() as patch:
                patch.setattr(st, "rotate", _previous_rotate)
                out_old, state_old = old(x, state_old)
            assert torch.equal(out_new, out_old), t
            for key in ("k", "v", "n"):
                assert torch.equal(state_new[key], state_old[key]), (t, key)
            handed_out.append((state_new["k"], state_new["k"].clone()))
            if t % 37 == 5:  # a reset's regather hands back fresh tensors
                state_new = {key: value.clone() for key, value in state_new.items()}
            if t % 23 == 7:  # two passes from one state: the second must not see the first
                probe = torch.randn(batch, 1, 5)
                first, first_state = new(probe, state_new)
                second, second_state = new(probe, state_new)
                assert torch.equal(first, second)
                assert torch.equal(first_state["k"], second_state["k"])
    assert in_place > 100  # the arena was used, not just fresh buffers every step
    for view, values in handed_out:  # no cache handed out was written over later
        assert torch.equal(view, values)


def test_the_arena_is_scratch_not_state():
    new, _ = _encoders()
    with torch.inference_mode():
        new(torch.randn(2, 1, 5), None)
    assert new._arena is not None
    assert copy.deepcopy(new)._arena is None
    assert pickle.loads(pickle.dumps(new))._arena is None
    assert not any("arena" in name for name in new.state_dict())
    # Training after acting: autograd never writes into the arena.
    x = torch.randn(2, 4, 5)
    out, _ = new(x, new.initial_state(2))
    out.sum().backward()
    assert new.embed.weight.grad is not None


def test_a_state_never_handed_back_keeps_a_buffer_of_exactly_cache_and_new_steps():
    """A caller that keeps every cache out instead of handing it back (RLlib storing the
    whole state per step, numpy views of it) must not hold a larger buffer per step than
    before; the arena's extra rows appear only once a cache out comes back."""
    new, _ = _encoders(context=9)
    past, batch, width, layers = 8, 3, 24, 3
    exact = batch * layers * (past + 1) * width * 4  # bytes of one float32 buffer
    with torch.inference_mode():
        state = new.initial_state(batch)
        for _ in range(5):  # every step from a copy: as RLlib's own state piece batches them
            _, out = new(torch.randn(batch, 1, 5), {k: v.clone() for k, v in state.items()})
            assert out["k"].untyped_storage().nbytes() == exact
            state = out
        _, back = new(torch.randn(batch, 1, 5), state)  # handed back: now an arena
        assert back["k"].untyped_storage().nbytes() > exact


def test_training_with_per_head_tables_equals_the_previous_tables_bit_for_bit(monkeypatch):
    """The rotation tables are materialized per head ((positions, heads, head_dim)); the
    learner's forward and backward over a chunk give the numbers the previous
    (positions, 1, head_dim) tables gave: outputs and every gradient bit for bit."""
    new, old = _encoders(context=9)
    tables_for = st.StatefulTransformerEncoder._tables_for

    def previous_tables(self, steps, device):
        cos, sin, window = tables_for(self, steps, device)
        assert cos.shape[1] == self.num_heads  # what this test pins: per-head tables
        return cos[:, :1].contiguous(), sin[:, :1].contiguous(), window

    torch.manual_seed(3)
    x = torch.randn(6, 7, 5)
    state = {
        "k": torch.randn(6, 3, 8, 24),
        "v": torch.randn(6, 3, 8, 24),
        "n": torch.tensor([[0], [3], [8], [8], [1], [5]]),
    }
    out_new, _ = new(x, state)
    out_new.square().mean().backward()
    with monkeypatch.context() as patch:
        patch.setattr(st.StatefulTransformerEncoder, "_tables_for", previous_tables)
        patch.setattr(st, "rotate", _previous_rotate)
        out_old, _ = old(x, state)
        out_old.square().mean().backward()
    assert torch.equal(out_new, out_old)
    for (name, a), b in zip(new.named_parameters(), old.parameters(), strict=True):
        assert a.grad is not None and b.grad is not None, name
        assert torch.equal(a.grad, b.grad), name

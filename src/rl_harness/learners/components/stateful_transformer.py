"""A causal transformer that carries its own context: a key/value cache of its past steps.

Every step is one token. A query attends to itself and the `context - 1` steps before
it (a sliding window), with rotary position embeddings over the window, pre-norm
blocks and a final LayerNorm. The cache holds, per layer, the keys and values of the
last `context - 1` steps (keys before rotation, so positions stay relative to the
window) and `n`, how many of those slots hold real steps (0 after a reset).

The same code runs one step (acting: attention over the cache, O(context)) and a whole
sequence (training chunks, probes): a sequence of T steps starting from a cache sees,
at every position, exactly the keys and values that stepping one at a time sees, so
the two agree to float rounding. State tensors are batch-first:
k, v (B, num_layers, context - 1, d_model) float, n (B, 1) int64.

Acting (no autograd) costs one step of attention per layer plus the cache's upkeep: a pass
handed back its own last cache out (the env runner does, every step without a reset) writes
the new keys/values into its arena in place instead of copying the cache into a fresh
buffer; any other state gets a fresh buffer, as before. A cache out is a view of that
memory and is never written to afterwards, so caches handed out stay valid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rl_harness.learners.components._checks import positive_int


def rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (..., P, heads, head_dim): pairs (i, i + head_dim / 2) rotate by
    their position's angles. cos = [cos, cos], signed_sin = [-sin, sin], each
    (P, 1, head_dim). x in its contiguous (positions, heads) layout: the same elementwise
    ops on the (heads, positions) transposed view run ~5x slower on CPU."""
    half = x.shape[-1] // 2
    if torch.is_grad_enabled() and x.requires_grad:
        return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * signed_sin
    # Without autograd (acting, replays): the same products and sum per element (so the
    # same bits), the swapped halves multiplied straight into one buffer instead of
    # concatenated first (one temporary less per call, on every layer's 64 keys per step).
    swapped = torch.roll(x, half, dims=-1)  # [second half, first half], as the cat
    return swapped.mul_(signed_sin).add_(x * cos)


class CachedSelfAttention(nn.Module):
    """Multi-head causal self-attention over [cache, new steps] in a sliding window."""

    def __init__(self, d_model: int, num_heads: int, context: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.context = context
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(
        self,
        x: torch.Tensor,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        mask: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, D) normed; cache (B, C-1, D); mask (B, 1, T, C-1+T) True = attend;
        cos / sin tables (T + C-1+T, 1, head_dim): the T query positions, then the C-1+T
        key positions. Without autograd, cache_k / cache_v may instead be (B, C-1+T, D)
        buffers holding the cache in their first C-1 rows: the new keys/values are written
        into the rest (no copy of the cache per layer).

        Returns (output (B, T, D), keys (B, C-1+T, D), values (B, C-1+T, D)).
        """
        batch, steps, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=-1)
        if cache_k.shape[1] == self.context - 1:
            keys = torch.cat((cache_k, k), dim=1)
            values = torch.cat((cache_v, v), dim=1)
        else:
            keys, values = cache_k, cache_v
            keys[:, -steps:] = k
            values[:, -steps:] = v
        heads = (batch, -1, self.num_heads, self.head_dim)
        qh = rotate(q.reshape(heads), cos[:steps], sin[:steps]).transpose(1, 2)
        kh = rotate(keys.view(heads), cos[steps:], sin[steps:]).transpose(1, 2)
        vh = values.view(heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(batch, steps, width)), keys, values


class CachedBlock(nn.Module):
    """Pre-norm block: x + attn(LN(x)); x + MLP(LN(x))."""

    def __init__(self, d_model: int, num_heads: int, context: int, ff_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = CachedSelfAttention(d_model, num_heads, context)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, ff_dim), nn.GELU(), nn.Linear(ff_dim, d_model))

    def forward(
        self,
        x: torch.Tensor,
        cache_k: torch.Tensor,
        cache_v: torch.Tensor,
        mask: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        attended, keys, values = self.attn(self.norm1(x), cache_k, cache_v, mask, cos, sin)
        x = x + attended
        return x + self.mlp(self.norm2(x)), keys, values


@dataclass
class _Arena:
    """The acting K/V arena: (B, L, C-1+extra, D) each; the newest cache out is the
    window [head, head + C-1)."""

    k: torch.Tensor
    v: torch.Tensor
    head: int
    inference: bool  # made under torch.inference_mode (only written to under it again)

    def window_shape(self, past: int) -> tuple[int, ...]:
        """The shape of a cache out: (B, L, past, D)."""
        batch, layers, _, width = self.k.shape
        return (batch, layers, past, width)


class StatefulTransformerEncoder(nn.Module):
    """(B, T, input_dim) steps + cache -> (final normed residual (B, T, d_model), new cache).

    `context` counts the step itself: each position sees at most `context` steps.
    `input_bias` (default True): whether the input projection has a bias.
    """

    inv_freq: torch.Tensor  # buffers (register_buffer), typed for mypy
    slots: torch.Tensor
    # Rows an acting arena holds beyond the cache: a fresh one (one copy of the cache) at
    # most every ARENA_STEPS single steps.
    ARENA_STEPS = 64

    def __init__(
        self,
        *,
        input_dim: int,
        context: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        ff_dim: int | None = None,
        rope_base: float = 10000.0,
        input_bias: bool = True,
    ) -> None:
        super().__init__()
        self.input_dim = positive_int("input_dim", input_dim)
        self.context = positive_int("context", context)
        if context < 2:
            raise ValueError(f"context must be at least 2 (the step and one before), got {context}")
        self.d_model = positive_int("d_model", d_model)
        self.num_heads = positive_int("num_heads", num_heads)
        self.num_layers = positive_int("num_layers", num_layers)
        ff_dim = 4 * d_model if ff_dim is None else positive_int("ff_dim", ff_dim)
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        head_dim = d_model // num_heads
        if head_dim % 2 != 0:
            raise ValueError(
                f"d_model / num_heads = {head_dim} must be even (rotary embeddings rotate pairs)"
            )
        if not rope_base > 1.0:
            raise ValueError(f"rope_base must be > 1, got {rope_base!r}")
        self.embed = nn.Linear(input_dim, d_model, bias=input_bias)
        self.blocks = nn.ModuleList(
            CachedBlock(d_model, num_heads, context, ff_dim) for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.output_dim = d_model
        inv_freq = rope_base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # Window slot index of every cache slot, for the validity mask.
        self.register_buffer("slots", torch.arange(context - 1), persistent=False)
        self._arena: _Arena | None = None  # see _acting_buffers; not part of the state
        self._tables: dict[
            tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor, torch.Tensor]
        ] = {}

    def __getstate__(self) -> dict[str, Any]:
        # The acting arena is scratch memory, not state: copies and pickles start without it.
        # torch's nn.Module.__getstate__ is unannotated (it returns a copy of __dict__).
        state = dict(super().__getstate__())  # type: ignore[no-untyped-call]
        state["_arena"] = None
        return state

    def initial_state(
        self, batch_size: int, device: torch.device | None = None
    ) -> dict[str, torch.Tensor]:
        """An empty cache: k, v zeros (B, L, C-1, D); n zeros (B, 1)."""
        shape = (batch_size, self.num_layers, self.context - 1, self.d_model)
        return {
            "k": torch.zeros(shape, device=device),
            "v": torch.zeros(shape, device=device),
            "n": torch.zeros(batch_size, 1, dtype=torch.int64, device=device),
        }

    def _tables_for(
        self, steps: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rotation tables (T + C-1+T, 1, head_dim): query positions then key positions, and
        the window mask (T, C-1+T); cached per T."""
        key = (steps, device)
        if key not in self._tables:  # a handful of sizes: 1 (acting), max_seq_len, ...
            # Plain tensors even when first built under inference_mode (acting), so
            # training can save them for backward.
            with torch.inference_mode(False):
                past = self.context - 1
                positions = torch.arange(past + steps, device=device, dtype=torch.float32)
                angles = torch.outer(positions, self.inv_freq.to(device).clone())
                angles = torch.cat((angles[past:], angles))  # queries, then keys
                # Materialized per head: (positions, heads, head_dim) contiguous, so the
                # rotation's elementwise ops run over whole rows (a (P, 1, head_dim) table
                # broadcast over heads runs the loops head_dim wide); the same numbers.
                heads = (-1, self.num_heads, -1)
                cos = torch.cat((angles.cos(), angles.cos()), dim=-1)[:, None]
                sin = torch.cat((-angles.sin(), angles.sin()), dim=-1)[:, None]
                cos, sin = cos.expand(heads).contiguous(), sin.expand(heads).contiguous()
                query = torch.arange(past, past + steps, device=device)[:, None]
                keys = torch.arange(past + steps, device=device)[None, :]
                window = (keys <= query) & (keys > query - self.context)
                self._tables[key] = (cos, sin, window)
        return self._tables[key]

    def _mask(self, n: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
        """(B, 1, T, C-1+T): causal, within `context`, cache slots only where filled."""
        past, steps = self.context - 1, window.shape[0]
        filled = self.slots >= past - n  # (B, C-1): the newest n slots are real
        valid = torch.cat((filled, filled.new_ones(n.shape[0], steps)), dim=1)
        return (window[None] & valid[:, None, :])[:, None]

    def forward(
        self, x: torch.Tensor, state: dict[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """x (B, T, input_dim), state from `initial_state` or a previous call (None: empty).

        Returns the final normed residual stream (B, T, d_model) and the cache after
        the last of the T steps.
        """
        residuals, state_out = self.forward_residuals(x, state, keep_all=False)
        return residuals["final_norm"], state_out

    def forward_residuals(
        self,
        x: torch.Tensor,
        state: dict[str, torch.Tensor] | None = None,
        *,
        keep_all: bool = True,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Like `forward`, but returns the residual stream at every depth, each (B, T, D):
        "embed" (input to block 1), "block_1" ... "block_L" (after each block, before the
        final norm) and "final_norm" (what `forward` returns, the same computation).
        keep_all=False keeps only "final_norm".
        """
        if x.dim() != 3 or x.shape[-1] != self.input_dim:
            raise ValueError(f"expected (B, T, {self.input_dim}) inputs, got {tuple(x.shape)}")
        batch, steps = x.shape[:2]
        if state is None:
            state = self.initial_state(batch, device=x.device)
        past = self.context - 1
        cos, sin, window = self._tables_for(steps, x.device)
        mask = self._mask(state["n"], window)
        h = self.embed(x)
        residuals: dict[str, torch.Tensor] = {"embed": h} if keep_all else {}
        if torch.is_grad_enabled():
            caches = [(state["k"][:, i], state["v"][:, i]) for i in range(self.num_layers)]
        else:
            # Acting: one buffer per K and V holds [cache, new steps] of every layer; the
            # cache out is a view of it (no per-layer concatenation, no stacking).
            buffers = self._acting_buffers(state, steps, h)
            caches = [(buffers[0][:, i], buffers[1][:, i]) for i in range(self.num_layers)]
        new_k, new_v = [], []
        for layer, (block, (cache_k, cache_v)) in enumerate(zip(self.blocks, caches, strict=True)):
            h, keys, values = block(h, cache_k, cache_v, mask, cos, sin)
            new_k.append(keys[:, -past:])
            new_v.append(values[:, -past:])
            if keep_all:
                residuals[f"block_{layer + 1}"] = h
        residuals["final_norm"] = self.norm(h)
        if torch.is_grad_enabled():
            k_out, v_out = torch.stack(new_k, dim=1), torch.stack(new_v, dim=1)
        else:
            k_out, v_out = buffers[0][:, :, steps:], buffers[1][:, :, steps:]
        n_out = (state["n"] + steps).clamp(max=past)
        return residuals, {"k": k_out, "v": v_out, "n": n_out}

    def _acting_buffers(
        self, state: dict[str, torch.Tensor], steps: int, like: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V buffers (B, L, C-1+T, D) for a pass without autograd: the cache in their
        first C-1 rows, the T new steps' keys/values to be written into the rest.

        They are windows of an arena. When `state` is the cache out of this module's last
        such pass (a view of the arena at its newest window, as the env runner hands it
        back every step without a reset) and the arena has room, the window moves on by T
        rows in place: no copy of the C-1 cached steps per step. Otherwise (another state,
        a reset, a full arena) a fresh arena is allocated and the cache copied in, as every
        step did before. The arena is only ever written past its newest window, so every
        cache out handed out before keeps its values."""
        past = self.context - 1
        k_in, v_in = state["k"], state["v"]
        arena = self._arena
        mode = torch.is_inference_mode_enabled()
        latest = (
            arena is not None
            and arena.inference == mode
            and tuple(k_in.shape) == tuple(v_in.shape) == arena.window_shape(past)
            and k_in.stride() == arena.k.stride() == v_in.stride()
            and k_in.dtype == arena.k.dtype == v_in.dtype
            and k_in.data_ptr() == arena.k[:, :, arena.head].data_ptr()
            and v_in.data_ptr() == arena.v[:, :, arena.head].data_ptr()
        )
        if latest and arena is not None and arena.head + past + steps <= arena.k.shape[2]:
            window = slice(arena.head, arena.head + past + steps)
            arena.head += steps
            return arena.k[:, :, window], arena.v[:, :, window]
        # A fresh buffer with the cache copied in. Room for ARENA_STEPS more steps only once
        # a cache out came back (acting): a caller that keeps every cache out (RLlib storing
        # the whole state per step) keeps buffers of exactly cache + new steps, as before.
        rows = past + (max(steps, self.ARENA_STEPS) if latest else steps)
        shape = (like.shape[0], self.num_layers, rows, self.d_model)
        k_arena, v_arena = like.new_empty(shape), like.new_empty(shape)
        k_arena[:, :, :past] = k_in
        v_arena[:, :, :past] = v_in
        self._arena = _Arena(k_arena, v_arena, head=steps, inference=mode)
        return k_arena[:, :, : past + steps], v_arena[:, :, : past + steps]

    def residual_names(self) -> list[str]:
        """The depths `forward_residuals` names, in order: "embed", "block_1".."block_L",
        "final_norm"."""
        return ["embed", *(f"block_{i + 1}" for i in range(self.num_layers)), "final_norm"]

    def forward_edited(
        self,
        x: torch.Tensor,
        state: dict[str, torch.Tensor] | None,
        layer: str,
        edit: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """`forward` with the residual stream at `layer` (a name of `residual_names`)
        replaced by `edit(residual)` (B, T, D) -> (B, T, D): the blocks up to `layer` run as
        usual, the later blocks and the final norm read the edited residual ("final_norm"
        edits the output itself). For analysis (rl_harness.analysis.interventions); acting
        and training use `forward`.

        Returns (final normed residual (B, T, D) downstream of the edit, the residual at
        `layer` before the edit (B, T, D), state out). `state` is not modified. The state
        out holds the keys and values this pass computed: layers up to `layer` as `forward`
        computes them, later layers from the edited residual (what later steps would see if
        the edit were carried); keep `forward`'s state to leave the cache unedited.
        """
        names = self.residual_names()
        if layer not in names:
            raise ValueError(f"unknown layer {layer!r}; the residuals are {', '.join(names)}")
        if x.dim() != 3 or x.shape[-1] != self.input_dim:
            raise ValueError(f"expected (B, T, {self.input_dim}) inputs, got {tuple(x.shape)}")
        batch, steps = x.shape[:2]
        if state is None:
            state = self.initial_state(batch, device=x.device)
        past = self.context - 1
        cos, sin, window = self._tables_for(steps, x.device)
        mask = self._mask(state["n"], window)

        def edited(residual: torch.Tensor) -> torch.Tensor:
            out = edit(residual)
            if out.shape != residual.shape:
                raise ValueError(
                    f"the edit of {layer!r} returned {tuple(out.shape)}, expected "
                    f"{tuple(residual.shape)}"
                )
            return out

        h = self.embed(x)
        before = h
        if layer == "embed":
            h = edited(h)
        new_k, new_v = [], []
        for index, block in enumerate(self.blocks):
            # Each layer's cache concatenated with the new steps (no shared buffer): the
            # caller's state stays untouched.
            h, keys, values = block(h, state["k"][:, index], state["v"][:, index], mask, cos, sin)
            new_k.append(keys[:, -past:])
            new_v.append(values[:, -past:])
            if layer == f"block_{index + 1}":
                before = h
                h = edited(h)
        out = self.norm(h)
        if layer == "final_norm":
            before = out
            out = edited(out)
        n_out = (state["n"] + steps).clamp(max=past)
        return out, before, {"k": torch.stack(new_k, 1), "v": torch.stack(new_v, 1), "n": n_out}

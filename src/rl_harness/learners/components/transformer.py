"""Small causal (decoder-only) transformer over a fixed context window.

Pre-norm blocks, h += Attn(LN1 h); h += MLP(LN2 h), with the options the belief-geometry
paper's transformer needs (Shai et al. 2024: d_model 64, 4 layers, 1 head of width 8, ReLU
MLP of width 256, learned positions, a 10-token window):

- `d_head`: each head's width, independent of d_model / num_heads (attention projects
  d_model -> num_heads * d_head and back);
- `activation`: the MLP's nonlinearity, "relu" or "gelu";
- `positions`: "learned" (a (context_len, d_model) table added to the embeddings) or
  "rotary" (queries and keys rotated by position inside every head; d_head must be even);
- `final_norm`: a LayerNorm after the last block (True) or none (the last block's residual
  is the output).

The window is strict: position i attends to positions <= i of the window it is given and
nothing else, so tokens outside the window cannot reach the output. Every depth of the
residual stream is readable (`forward_residuals`): "embed", "block_1".."block_L" and
"final_norm" (what `forward` returns; the last block's residual without a final norm).

Prefix sharing (`last_position_prefix_shared`): position j's hidden state, at every depth,
depends only on the window's inputs 0..j and on j itself (causal attention, positions by
index), so windows that share their oldest j + 1 inputs share those states exactly. The
method computes each distinct prefix of a batch once (a trie: `prefix_trie`), attention
gathering each node's ancestors, and returns what `last_position` returns, to float
summation order. It is the same function with the same parameters, only cheaper when
windows overlap. (A banded causal mask over a whole episode chunk is a different function
once num_layers > 1: a layer-2 state at step t would read layer-1 states whose own windows
reach back past t's window, a receptive field of num_layers * (W - 1) + 1 steps, and
learned absolute positions would index chunk steps, not window slots.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from rl_harness.learners.components._checks import positive_int

MLP_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU}
POSITIONS = ("learned", "rotary")


def rotary_tables(
    width: int, d_head: int, base: float, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, signed_sin), each (width, d_head): position p's angles p * base^(-2i / d_head)
    for the pairs (i, i + d_head / 2), laid out for `rotate_pairs`."""
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float32, device=device) / d_head)
    angles = torch.outer(torch.arange(width, dtype=torch.float32, device=device), inv_freq)
    cos = torch.cat((angles.cos(), angles.cos()), dim=-1)
    sin = torch.cat((-angles.sin(), angles.sin()), dim=-1)
    return cos, sin


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (..., P, d_head): the pair (i, i + d_head / 2) at position p
    rotates by p's angle i, so q_p . k_r depends on p - r only."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * signed_sin


@dataclass(frozen=True)
class PrefixTrie:
    """The distinct prefixes of a batch of windows (B, W), oldest input first.

    Nodes are numbered depth by depth (all depth-0 nodes, then depth 1, ...); node n is the
    prefix of length depth[n] + 1 ending in input symbol symbol[n]. ancestors[n, i] is the
    node of the same prefix cut to depth i for i <= depth[n] (ancestors[n, depth[n]] = n);
    for i > depth[n] it is 0 and `attend[n, i]` is False. leaf[b] is window b's full-window
    node (depth W - 1), and nodes leaf_start.. are the depth W - 1 nodes.
    """

    symbol: torch.Tensor  # (N,) long
    depth: torch.Tensor  # (N,) long
    ancestors: torch.Tensor  # (N, W) long
    attend: torch.Tensor  # (N, W) bool: ancestors[:, i] is real (i <= depth)
    leaf: torch.Tensor  # (B,) long
    leaf_start: int


def prefix_trie(symbols: torch.Tensor, vocab: int) -> PrefixTrie:
    """The trie of the rows of `symbols` (B, W) long in [0, vocab), oldest first.

    Depth by depth, a node is a distinct (parent node, symbol) pair: torch.unique over the
    key parent * vocab + symbol gives the nodes (sorted, so key // vocab is each node's
    parent and key % vocab its symbol) and every window's node at that depth.
    """
    batch, width = symbols.shape
    device = symbols.device
    node_of_window = torch.zeros(batch, dtype=torch.long, device=device)
    symbol_parts, depth_parts, ancestor_parts = [], [], []
    offset = 0
    previous_ancestors = torch.zeros((1, width), dtype=torch.long, device=device)
    for j in range(width):
        keys, node_of_window = torch.unique(
            node_of_window * vocab + symbols[:, j], return_inverse=True
        )
        count = keys.shape[0]
        parent = torch.div(keys, vocab, rounding_mode="floor")
        # A node's ancestors are its parent's, plus itself at its own depth.
        ancestors = previous_ancestors[parent if j > 0 else torch.zeros_like(parent)].clone()
        ancestors[:, j] = offset + torch.arange(count, device=device)
        symbol_parts.append(keys - parent * vocab)
        depth_parts.append(torch.full((count,), j, dtype=torch.long, device=device))
        ancestor_parts.append(ancestors)
        previous_ancestors = ancestors
        offset += count
    depth = torch.cat(depth_parts)
    return PrefixTrie(
        symbol=torch.cat(symbol_parts),
        depth=depth,
        ancestors=torch.cat(ancestor_parts),
        attend=torch.arange(width, device=device)[None, :] <= depth[:, None],
        leaf=offset - count + node_of_window,
        leaf_start=offset - count,
    )


def distinct_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows (U, D), inverse (R,)): the distinct rows of x (R, D), x[i] == rows[inverse[i]].

    float32 rows are compared bit for bit, column by column: a row's id is the distinct
    (id so far, the column's 32 bits) pair, a 1-D torch.unique on an int64 key (many times
    faster on CPU than unique(dim=0)); rows differing in any bit (even -0.0 and 0.0) stay
    distinct, so sharing is always exact. Other dtypes use unique(dim=0).
    """
    if x.dtype != torch.float32:
        unique_rows: tuple[torch.Tensor, torch.Tensor] = torch.unique(x, dim=0, return_inverse=True)
        return unique_rows
    bits = x.view(torch.int32).long() + 2**31  # each column's pattern in [0, 2^32)
    ids = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
    count = 1
    for column in range(x.shape[1]):
        # ids < R < 2^31, so id * 2^32 + bits fits in an int64.
        distinct, ids = torch.unique(ids * 2**32 + bits[:, column], return_inverse=True)
        count = distinct.shape[0]
    # Rows with one id are bit-identical, so which duplicate lands in the table is moot.
    return x.new_zeros(count, x.shape[1]).index_copy(0, ids, x), ids


class WindowAttention(nn.Module):
    """Causal multi-head self-attention: (B, W, d_model) -> (B, W, d_model)."""

    def __init__(self, d_model: int, num_heads: int, d_head: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.d_head = d_head
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * num_heads * d_head)
        self.out = nn.Linear(num_heads * d_head, d_model)

    def forward(
        self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None
    ) -> torch.Tensor:
        batch, width, _ = x.shape
        q, k, v = (
            t.view(batch, width, self.num_heads, self.d_head).transpose(1, 2)
            for t in self.qkv(x).chunk(3, dim=-1)
        )
        if rotary is not None:
            q, k = rotate_pairs(q, *rotary), rotate_pairs(k, *rotary)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        out: torch.Tensor = self.out(
            y.transpose(1, 2).reshape(batch, width, self.num_heads * self.d_head)
        )
        return out

    def forward_trie(
        self,
        x: torch.Tensor,
        trie: PrefixTrie,
        queries: slice,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> torch.Tensor:
        """Attention over trie nodes x (N, d_model) for the nodes `queries`: each attends
        to its ancestors (itself included), exactly its window position's causal keys."""
        heads, d_head = self.num_heads, self.d_head
        q, k, v = (t.view(-1, heads, d_head) for t in self.qkv(x).chunk(3, dim=-1))
        q = q[queries]
        if rotary is not None:
            cos, sin = (table[trie.depth][:, None] for table in rotary)
            k = rotate_pairs(k, cos, sin)
            q = rotate_pairs(q, cos[queries], sin[queries])
        ancestors = trie.ancestors[queries]  # (Q, W)
        width = ancestors.shape[1]
        # index_select and broadcast products: on CPU several times faster than advanced
        # indexing (whose backward sorts) and batched matmuls of (1 x d_head) matrices.
        keys, values = (
            t.index_select(0, ancestors.reshape(-1)).view(-1, width, heads, d_head) for t in (k, v)
        )
        scores = (q[:, None] * keys).sum(-1) / math.sqrt(d_head)  # (Q, W, heads)
        scores = scores.masked_fill(~trie.attend[queries][:, :, None], float("-inf"))
        y = (scores.softmax(dim=1)[..., None] * values).sum(1)  # (Q, heads, d_head)
        out: torch.Tensor = self.out(y.reshape(-1, heads * d_head))
        return out


class WindowBlock(nn.Module):
    """Pre-norm block: h + Attn(LN1 h), then h + W2 act(W1 LN2 h)."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_head: int,
        ff_dim: int,
        activation: str,
        dropout: float,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = WindowAttention(d_model, num_heads, d_head, dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, ff_dim), MLP_ACTIVATIONS[activation](), nn.Linear(ff_dim, d_model)
        )
        self.drop = nn.Dropout(dropout)

    def forward(
        self, h: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None
    ) -> torch.Tensor:
        h = h + self.drop(self.attn(self.norm1(h), rotary))
        out: torch.Tensor = h + self.drop(self.mlp(self.norm2(h)))
        return out

    def forward_trie(
        self,
        h: torch.Tensor,
        trie: PrefixTrie,
        queries: slice,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> torch.Tensor:
        """The block on trie nodes h (N, d_model), returned for the nodes `queries`."""
        h = h[queries] + self.attn.forward_trie(self.norm1(h), trie, queries, rotary)
        out: torch.Tensor = h + self.mlp(self.norm2(h))
        return out


class CausalTransformerEncoder(nn.Module):
    """Pre-norm causal transformer: a window of W <= context_len positions -> (B, W, d_model).

    Inputs are either features (B, W, input_dim), projected linearly, or, with
    `token_input=True`, integer token ids (B, W) in [0, input_dim), embedded. Position i
    attends to positions <= i only, so the last position summarises the whole window.
    Options (module docstring): d_head (default d_model / num_heads), activation ("gelu"),
    positions ("learned"), final_norm (True), rope_base (10000, rotary only), input_bias
    (True: the linear input projection has a bias; token embeddings never do).
    """

    def __init__(
        self,
        *,
        input_dim: int,
        context_len: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        ff_dim: int | None = None,
        dropout: float = 0.0,
        token_input: bool = False,
        d_head: int | None = None,
        activation: str = "gelu",
        positions: str = "learned",
        final_norm: bool = True,
        rope_base: float = 10000.0,
        input_bias: bool = True,
    ) -> None:
        super().__init__()
        self.input_dim = positive_int("input_dim", input_dim)
        self.context_len = positive_int("context_len", context_len)
        self.d_model = positive_int("d_model", d_model)
        self.num_heads = positive_int("num_heads", num_heads)
        self.num_layers = positive_int("num_layers", num_layers)
        ff_dim = 4 * d_model if ff_dim is None else positive_int("ff_dim", ff_dim)
        if d_head is None:
            if d_model % num_heads != 0:
                raise ValueError(
                    f"d_model ({d_model}) must be divisible by num_heads ({num_heads}), "
                    "or give d_head"
                )
            d_head = d_model // num_heads
        self.d_head = positive_int("d_head", d_head)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if activation not in MLP_ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(MLP_ACTIVATIONS)}, got {activation!r}"
            )
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {list(POSITIONS)}, got {positions!r}")
        if positions == "rotary" and d_head % 2 != 0:
            raise ValueError(f"d_head = {d_head} must be even for rotary positions (pairs rotate)")
        if not rope_base > 1.0:
            raise ValueError(f"rope_base must be > 1, got {rope_base!r}")
        if not isinstance(final_norm, bool):
            raise ValueError(f"final_norm must be true or false, got {final_norm!r}")
        self.token_input = token_input
        self.positions = positions
        self.rope_base = float(rope_base)
        self.embed: nn.Module = (
            nn.Embedding(input_dim, d_model)
            if token_input
            else nn.Linear(input_dim, d_model, bias=input_bias)
        )
        self.position: nn.Parameter | None = None
        if positions == "learned":
            self.position = nn.Parameter(torch.zeros(context_len, d_model))
            nn.init.normal_(self.position, std=0.02)
        self.blocks = nn.ModuleList(
            WindowBlock(d_model, num_heads, self.d_head, ff_dim, activation, dropout)
            for _ in range(num_layers)
        )
        self.norm: nn.Module | None = nn.LayerNorm(d_model) if final_norm else None
        self.output_dim = d_model

    def _blocks(self) -> Sequence[WindowBlock]:
        # To mypy a ModuleList holds Modules; this one holds only WindowBlocks.
        return cast(Sequence[WindowBlock], self.blocks)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        if self.token_input:
            if x.dim() != 2 or x.is_floating_point():
                raise ValueError(f"expected integer tokens (B, W), got {x.dtype} {tuple(x.shape)}")
            h = self.embed(x.long())
        else:
            if x.dim() != 3 or x.shape[-1] != self.input_dim:
                raise ValueError(f"expected (B, W, {self.input_dim}) inputs, got {tuple(x.shape)}")
            h = self.embed(x)
        width = h.shape[1]
        if width > self.context_len:
            raise ValueError(f"window of {width} positions exceeds context_len {self.context_len}")
        out: torch.Tensor = h if self.position is None else h + self.position[:width]
        return out

    def forward_residuals(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The residual stream at every depth, each (B, W, d_model): "embed" (input to
        block 1: embeddings plus learned positions), "block_1" ... "block_L" (after each
        block, before the final norm) and "final_norm" (after it; what `forward` returns).
        Without a final norm, "final_norm" is "block_L" itself."""
        h = self._embed(x)
        rotary = None
        if self.positions == "rotary":
            rotary = rotary_tables(h.shape[1], self.d_head, self.rope_base, h.device)
        residuals = {"embed": h}
        for index, block in enumerate(self._blocks()):
            h = block(h, rotary)
            residuals[f"block_{index + 1}"] = h
        residuals["final_norm"] = h if self.norm is None else self.norm(h)
        return residuals

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per-position outputs (B, W, d_model): the final normed residual stream."""
        return self.forward_residuals(x)["final_norm"]

    def last_position(self, x: torch.Tensor) -> torch.Tensor:
        """The last position's output (B, d_model)."""
        return self.forward(x)[:, -1]

    def last_position_prefix_shared(self, x: torch.Tensor) -> torch.Tensor:
        """`last_position(x)` computed once per distinct prefix of the batch's windows.

        Same function, same parameters (module docstring); cheaper when windows share their
        oldest inputs. Feature inputs are deduplicated bit for bit (`distinct_rows`).
        Needs dropout 0 in training (per-node dropout masks would be shared by windows).
        """
        if self.training and any(block.drop.p > 0 for block in self._blocks()):
            raise ValueError("prefix-shared forward needs dropout 0 (shared nodes, shared masks)")
        if self.token_input:
            if x.dim() != 2 or x.is_floating_point():
                raise ValueError(f"expected integer tokens (B, W), got {x.dtype} {tuple(x.shape)}")
            symbols, vocab = x.long(), self.input_dim
        else:
            if x.dim() != 3 or x.shape[-1] != self.input_dim:
                raise ValueError(f"expected (B, W, {self.input_dim}) inputs, got {tuple(x.shape)}")
            rows, symbols = distinct_rows(x.reshape(-1, self.input_dim))
            symbols, vocab = symbols.view(x.shape[:2]), rows.shape[0]
        width = x.shape[1]
        if width > self.context_len:
            raise ValueError(f"window of {width} positions exceeds context_len {self.context_len}")
        trie = prefix_trie(symbols, vocab)
        # Token inputs: the nn.Embedding's table; features: the nn.Linear on the distinct rows.
        table: torch.Tensor = (
            cast(nn.Embedding, self.embed).weight if self.token_input else self.embed(rows)
        )
        h = table.index_select(0, trie.symbol)
        if self.position is not None:
            h = h + self.position[trie.depth]
        rotary = None
        if self.positions == "rotary":
            rotary = rotary_tables(width, self.d_head, self.rope_base, h.device)
        everything = slice(None)
        for block in self._blocks()[:-1]:
            h = block.forward_trie(h, trie, everything, rotary)
        # Only the full windows' nodes feed the output: the last block queries them alone.
        h = self._blocks()[-1].forward_trie(h, trie, slice(trie.leaf_start, None), rotary)
        if self.norm is not None:
            h = self.norm(h)
        out: torch.Tensor = h.index_select(0, trie.leaf - trie.leaf_start)
        return out

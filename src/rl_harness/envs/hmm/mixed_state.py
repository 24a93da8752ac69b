"""The mixed-state presentation (MSP) of a finite HMM to a given depth, and exact entropies.

Depth d of the MSP holds every token prefix of length d with nonzero probability, its
belief (filtered from the stationary distribution) and its probability (the product of the
filter's normalizers). Prefixes whose beliefs agree within a tolerance are merged into one
node (their probabilities summed): equal beliefs have equal futures, so merging equal
beliefs loses nothing; merging near-equal ones moves beliefs and entropies by about the
tolerance. Both happen: Z1R's beliefs coincide exactly once it synchronizes, while MESS3
(x 0.05, alpha 0.85) first has distinct beliefs closer than 1e-9 at depth 12 (its prefixes
0^12, 010^10, 020^10, 10^11, 20^11 differ by under 1e-9) and merges them at the default
tolerance. Each depth is computed in one NumPy pass over all its nodes and tokens.

Entropy rates, in bits: `unifilar_entropy_rate` is exact for a unifilar model (the state
left and the token fix the state entered): there h = sum_i pi_i H(next token | state i).
For any model, `MixedStatePresentation.conditional_entropies` gives H(X_{l+1} | X_1..X_l)
exactly for l = 0..depth; for a stationary process these fall to the entropy rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_harness.envs.hmm.model import HMMModel

# Stationarity check of a start distribution, and the smallest merge tolerance accepted
# (beliefs carry float64 rounding of about 1e-16 per filter step).
_STATIONARY_ATOL = 1e-9
_MIN_TOLERANCE = 1e-14


def _entropy_bits(probabilities: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(probabilities > 0, probabilities * np.log2(probabilities), 0.0)
    return -terms.sum(axis=-1)


def next_token_entropy(model: HMMModel, beliefs: np.ndarray) -> np.ndarray:
    """H(next token | belief) in bits, shape (...,) for beliefs (..., n_states)."""
    emit = model.token_matrices.sum(axis=2).T  # (n_states, n_tokens)
    return _entropy_bits(np.asarray(beliefs, dtype=np.float64) @ emit)


def is_unifilar(model: HMMModel) -> bool:
    """True when every (state, token) pair leads to at most one next state."""
    return bool(np.all((model.token_matrices > 0).sum(axis=2) <= 1))


def unifilar_entropy_rate(model: HMMModel, initial: np.ndarray | None = None) -> float:
    """Exact entropy rate in bits of a unifilar model: sum_i pi_i H(next token | state i).

    pi is `initial` (default `model.initial`) and must be stationary; a product of periodic
    chains has several stationary laws, and the rate is that of the one given. Raises if
    the model is not unifilar (then use the mixed-state presentation's conditional
    entropies, or the sampled `HMMModel.entropy_rate`).
    """
    if not is_unifilar(model):
        raise ValueError(f"{model.name!r} is not unifilar; its entropy rate has no closed form")
    start = _stationary_start(model, initial)
    return float(start @ next_token_entropy(model, np.eye(model.n_states)))


def merge_beliefs(
    beliefs: np.ndarray, weights: np.ndarray, tolerance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge rows of `beliefs` (n, s) that round to one point of a grid of spacing
    `tolerance`, summing their `weights` (n,).

    Returns (first, node_of_row, merged_weights): `first` indexes each merged node's first
    row, nodes ordered by it; `node_of_row` maps every row to its node. Rounding is a grid,
    not a distance: two beliefs closer than `tolerance` stay apart when they straddle a cell
    boundary, which for beliefs equal up to float rounding (1e-16 apart) at the default
    tolerance 1e-9 happens with probability about 1e-7 per coordinate.
    """
    if not tolerance >= _MIN_TOLERANCE:
        raise ValueError(f"tolerance must be at least {_MIN_TOLERANCE:g}, got {tolerance}")
    keys = np.round(np.asarray(beliefs, dtype=np.float64) / tolerance).astype(np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    node_of_row = rank[inverse.reshape(-1)]
    merged = np.bincount(node_of_row, weights=weights, minlength=len(order))
    return first[order], node_of_row, merged


@dataclass(frozen=True)
class MixedStateLayer:
    """One depth d of the MSP: its nodes and the edges into them from depth d - 1.

    Nodes are ordered by their first prefix (lexicographic in token index), which is also
    the prefix kept as `prefixes[n]`; `n_prefixes[n]` counts the prefixes merged into node n.
    Edge e goes from node `sources[e]` of depth d - 1 on token `tokens[e]` (with probability
    `token_probabilities[e]` given that node's belief) to node `targets[e]`; depth 0 has none.
    """

    depth: int
    beliefs: np.ndarray  # (n, n_states)
    probabilities: np.ndarray  # (n,), sums to 1
    prefixes: np.ndarray  # (n, depth) int64
    n_prefixes: np.ndarray  # (n,) int64
    sources: np.ndarray  # (m,) int64
    tokens: np.ndarray  # (m,) int64
    targets: np.ndarray  # (m,) int64
    token_probabilities: np.ndarray  # (m,)

    @property
    def n_nodes(self) -> int:
        return len(self.probabilities)


@dataclass(frozen=True, eq=False)
class MixedStatePresentation:
    """The MSP of `model` from `initial` to `depth` (see `mixed_state_presentation`)."""

    model: HMMModel
    initial: np.ndarray
    tolerance: float | None
    layers: tuple[MixedStateLayer, ...]  # layers[d] is depth d

    @property
    def depth(self) -> int:
        return len(self.layers) - 1

    def conditional_entropies(self) -> np.ndarray:
        """c[l] = H(X_{l+1} | X_1..X_l) in bits for l = 0..depth (c[0] = H(X_1)).

        Exact when merging joined only equal beliefs (`tolerance=None` never merges),
        else within about the tolerance; for a stationary start it is nonincreasing in l
        and converges to the entropy rate from above.
        """
        return np.array(
            [
                float(layer.probabilities @ next_token_entropy(self.model, layer.beliefs))
                for layer in self.layers
            ]
        )

    def block_entropies(self) -> np.ndarray:
        """H(l) = H(X_1..X_l) in bits for l = 0..depth + 1 (chain rule over the layers)."""
        return np.concatenate([[0.0], np.cumsum(self.conditional_entropies())])

    def entropy_rate_estimate(self) -> float:
        """H(X_{depth+1} | X_1..X_depth): an upper bound on the entropy rate, tight when
        the observer has synchronized by `depth` (or for a unifilar model, see
        `unifilar_entropy_rate`)."""
        return float(self.conditional_entropies()[-1])

    def pooled(self, tolerance: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
        """All depths' beliefs merged within `tolerance`, with probabilities averaged over
        the depths 0..depth (so they sum to 1): the points of the MSP plot."""
        beliefs = np.concatenate([layer.beliefs for layer in self.layers])
        weights = np.concatenate([layer.probabilities for layer in self.layers]) / len(self.layers)
        first, _, merged = merge_beliefs(beliefs, weights, tolerance)
        return beliefs[first], merged


def _stationary_start(model: HMMModel, initial: np.ndarray | None) -> np.ndarray:
    start = model.initial if initial is None else np.asarray(initial, dtype=np.float64)
    if start.shape != (model.n_states,) or np.any(start < 0) or abs(start.sum() - 1) > 1e-9:
        raise ValueError(f"initial must be a distribution over {model.n_states} states")
    if np.max(np.abs(start @ model.transition_matrix - start)) > _STATIONARY_ATOL:
        raise ValueError(
            f"the start distribution of {model.name!r} is not stationary; pass "
            "initial=model.stationary_distribution() (or another stationary law)"
        )
    return start


def mixed_state_presentation(
    model: HMMModel,
    depth: int,
    *,
    initial: np.ndarray | None = None,
    tolerance: float | None = 1e-9,
    max_nodes: int = 4_000_000,
) -> MixedStatePresentation:
    """The mixed-state presentation of `model` to `depth`.

    initial: a stationary start distribution (default `model.initial`, which must be
    stationary; every named constructor starts stationary). tolerance: merge beliefs that
    round to one grid point of this spacing (see `merge_beliefs`); None keeps every prefix
    as its own node. max_nodes: refuse a depth whose candidate edges exceed it (without
    merging MESS3 has 3**d prefixes at depth d).
    """
    if depth < 0:
        raise ValueError(f"depth must be non-negative, got {depth}")
    if tolerance is not None and not tolerance >= _MIN_TOLERANCE:
        raise ValueError(f"tolerance must be None or at least {_MIN_TOLERANCE:g}, got {tolerance}")
    start = _stationary_start(model, initial)
    n_tokens = model.n_tokens
    empty = np.zeros(0, dtype=np.int64)
    layers = [
        MixedStateLayer(
            depth=0,
            beliefs=start[None, :].copy(),
            probabilities=np.ones(1),
            prefixes=np.zeros((1, 0), dtype=np.int64),
            n_prefixes=np.ones(1, dtype=np.int64),
            sources=empty,
            tokens=empty,
            targets=empty,
            token_probabilities=np.zeros(0),
        )
    ]
    for d in range(1, depth + 1):
        parent = layers[-1]
        if parent.n_nodes * n_tokens > max_nodes:
            raise ValueError(
                f"depth {d} of {model.name!r} has {parent.n_nodes * n_tokens} candidate nodes "
                f"(max_nodes={max_nodes}); lower the depth or merge with a tolerance"
            )
        # Every (node, token) pair at once: unnormalized[n, k] = b_n T[k].
        unnormalized = np.einsum("ni,kij->nkj", parent.beliefs, model.token_matrices)
        norms = unnormalized.sum(axis=2)  # (n, k): P(token k | node n)
        sources, tokens = np.nonzero(norms > 0)  # row-major: ordered by (node, token)
        token_probabilities = norms[sources, tokens]
        beliefs = unnormalized[sources, tokens] / token_probabilities[:, None]
        probabilities = parent.probabilities[sources] * token_probabilities
        prefixes = np.concatenate([parent.prefixes[sources], tokens[:, None]], axis=1)
        n_prefixes = parent.n_prefixes[sources]
        if tolerance is None:
            first = targets = np.arange(len(sources))
            node_probabilities, node_prefixes = probabilities, n_prefixes
        else:
            # Rows are in lexicographic prefix order, so each node's first row is its
            # smallest prefix and nodes stay in prefix order.
            first, targets, node_probabilities = merge_beliefs(beliefs, probabilities, tolerance)
            node_prefixes = np.zeros(len(first), dtype=np.int64)
            np.add.at(node_prefixes, targets, n_prefixes)
        layers.append(
            MixedStateLayer(
                depth=d,
                beliefs=beliefs[first],
                probabilities=node_probabilities,
                prefixes=prefixes[first],
                n_prefixes=node_prefixes,
                sources=sources.astype(np.int64),
                tokens=tokens.astype(np.int64),
                targets=targets.astype(np.int64),
                token_probabilities=token_probabilities,
            )
        )
    return MixedStatePresentation(model, start.copy(), tolerance, tuple(layers))

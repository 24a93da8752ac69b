"""Exact belief (mixed-state) operations, vectorized over any leading batch shape.

A belief is a distribution over hidden states given the tokens seen so far. Seeing token k
maps belief b to b T[k] / (b T[k] 1), which conditions on k and advances one step at once.
"""

from __future__ import annotations

import numpy as np

from rl_harness.envs.hmm.model import HMMModel


def _tokens_array(model: HMMModel, tokens: object) -> np.ndarray:
    array = np.asarray(tokens)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"tokens must be integers, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and (array.min() < 0 or array.max() >= model.n_tokens):
        raise ValueError(
            f"tokens must lie in [0, {model.n_tokens}), got range [{array.min()}, {array.max()}]"
        )
    return array


def predict(model: HMMModel, belief: np.ndarray) -> np.ndarray:
    """Belief over the next state without seeing a token: b P."""
    result: np.ndarray = np.asarray(belief, dtype=np.float64) @ model.transition_matrix
    return result


def next_token_probabilities(model: HMMModel, belief: np.ndarray) -> np.ndarray:
    """P(next token = k | belief), shape (..., n_tokens)."""
    emit = model.token_matrices.sum(axis=2).T  # (n_states, n_tokens): P(token k | state i)
    result: np.ndarray = np.asarray(belief, dtype=np.float64) @ emit
    return result


def update(model: HMMModel, belief: np.ndarray, token: object) -> np.ndarray:
    """Bayes update on seeing `token` (broadcast against belief's batch shape): b T[k] / norm."""
    belief = np.asarray(belief, dtype=np.float64)
    tokens = _tokens_array(model, token)
    unnormalized = np.einsum("...i,...ij->...j", belief, model.token_matrices[tokens])
    norm = unnormalized.sum(axis=-1, keepdims=True)
    if np.any(norm <= 0):
        raise ValueError("token has probability zero under the given belief")
    result: np.ndarray = unnormalized / norm
    return result


def filter_beliefs(
    model: HMMModel, tokens: object, initial: np.ndarray | None = None
) -> np.ndarray:
    """Exact beliefs along many sequences at once.

    tokens: (n_seq, T) ints (or (T,)); returns (n_seq, T + 1, n_states) (or (T + 1, n_states)),
    where [:, t] is the belief after the first t tokens and [:, 0] is `initial`
    (default `model.initial`).
    """
    array = _tokens_array(model, tokens)
    single = array.ndim == 1
    if single:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"tokens must have shape (n_seq, T) or (T,), got {array.shape}")
    n_seq, length = array.shape
    start = model.initial if initial is None else np.asarray(initial, dtype=np.float64)
    if start.shape != (model.n_states,) or np.any(start < 0) or abs(start.sum() - 1) > 1e-9:
        raise ValueError(f"initial must be a distribution over {model.n_states} states")
    beliefs = np.empty((n_seq, length + 1, model.n_states))
    beliefs[:, 0] = start
    belief = beliefs[:, 0]
    for t in range(length):
        unnormalized = np.einsum("ni,nij->nj", belief, model.token_matrices[array[:, t]])
        norm = unnormalized.sum(axis=1, keepdims=True)
        if np.any(norm <= 0):
            bad = int(np.flatnonzero(norm[:, 0] <= 0)[0])
            raise ValueError(f"sequence {bad} has probability zero at token {t}")
        belief = unnormalized / norm
        beliefs[:, t + 1] = belief
    return beliefs[0] if single else beliefs


def window_beliefs(step_matrices: np.ndarray, prior: np.ndarray, m: int) -> np.ndarray:
    """Beliefs of an exact Bayes filter that sees only the last `m` steps of a sequence.

    step_matrices (..., T, S, S): step t's unnormalized update, b -> b M_t / (b M_t 1). For a
    passive HMM M_t = model.token_matrices[token_t] (condition on the token, advance); for a
    process whose transition changes per step, any such product, e.g. diag(P(token_t | state))
    U_t (measure the token, then move through the executed transition U_t); the identity for
    a step that carries nothing (a reset). `prior` (S,) is the belief the filter starts from
    at the oldest step it sees (e.g. the stationary law).

    Returns (..., T, S): at step t, normalize(prior M_{t-m+1} ... M_t). Steps before the
    sequence's start are not there to see, so for t < m - 1 the filter starts at step 0: with
    m >= T every step gets the exact filter from `prior` (`filter_beliefs` when the prior is
    the model's initial law). One batched product per lag, m in all.
    """
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"the window m must be an int >= 1, got {m!r}")
    matrices = np.asarray(step_matrices, dtype=np.float64)
    if matrices.ndim < 3 or matrices.shape[-1] != matrices.shape[-2] or matrices.shape[-3] == 0:
        raise ValueError(f"step_matrices must be (..., T, S, S), got {matrices.shape}")
    n_states, steps = matrices.shape[-1], matrices.shape[-3]
    start = np.asarray(prior, dtype=np.float64)
    if start.shape != (n_states,) or np.any(start < 0) or abs(start.sum() - 1) > 1e-9:
        raise ValueError(f"prior must be a distribution over {n_states} states")
    beliefs = np.broadcast_to(start, (*matrices.shape[:-2], n_states)).copy()
    # Oldest lag first: at lag L every step t >= L applies M_{t-L}; earlier steps skip it.
    for lag in range(min(m, steps) - 1, -1, -1):
        moved = np.einsum(
            "...ti,...tij->...tj", beliefs[..., lag:, :], matrices[..., : steps - lag, :, :]
        )
        norm = moved.sum(axis=-1, keepdims=True)
        if np.any(norm <= 0):
            raise ValueError(f"a window of {m} steps has probability zero under the prior")
        beliefs[..., lag:, :] = moved / norm
    return beliefs


def sampled_beliefs(
    model: HMMModel, n_sequences: int, n_steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Sample sequences from `model.initial` and filter them exactly.

    Returns tokens (n_sequences, n_steps) and beliefs (n_sequences, n_steps + 1, n_states).
    """
    sample = model.sample(n_steps, rng, n_sequences=n_sequences)
    return sample.tokens, filter_beliefs(model, sample.tokens)

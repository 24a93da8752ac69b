"""Finite hidden Markov models in token-labelled (Mealy) form.

A model is a stack of token matrices T with T[k, i, j] = P(next state j, token k | state i).
The state transition matrix is P = sum_k T[k]. A model given as a transition P plus an
emission E (a Moore machine: each state emits its token, here on entry) converts to it with
`HMMModel.from_transition_emission`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rl_harness.envs.hmm.sampling import CategoricalTable

# Rows must sum to one within this tolerance; they are renormalized after the check so
# that downstream sampling and filtering see exactly stochastic rows.
_SUM_ATOL = 1e-9


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _as_float_array(values: object, what: str) -> np.ndarray:
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} must be numeric, got {values!r}") from error
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contains non-finite values")
    if np.any(array < 0):
        raise ValueError(f"{what} contains negative entries (min {array.min():.3g})")
    return array


def _check_distribution(vector: np.ndarray, n_states: int, what: str) -> np.ndarray:
    if vector.shape != (n_states,):
        raise ValueError(f"{what} must have shape ({n_states},), got {vector.shape}")
    total = vector.sum()
    if abs(total - 1.0) > _SUM_ATOL:
        raise ValueError(f"{what} must sum to 1, sums to {total:.12g}")
    normalized: np.ndarray = vector / total
    return normalized


@dataclass(frozen=True)
class HMMSample:
    """Sampled sequences: tokens[..., t] is emitted by the move states[..., t] -> [..., t + 1]."""

    tokens: np.ndarray  # (n_steps,) or (n_sequences, n_steps), int64
    states: np.ndarray  # (n_steps + 1,) or (n_sequences, n_steps + 1), int64


@dataclass(frozen=True, eq=False)
class HMMModel:
    """An immutable, validated finite HMM. Build it with `from_token_matrices` or
    `from_transition_emission`; the arrays it exposes are read-only."""

    token_matrices: np.ndarray  # (n_tokens, n_states, n_states)
    initial: np.ndarray  # (n_states,)
    name: str = "hmm"
    transition_matrix: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tensor = _as_float_array(self.token_matrices, "token matrices")
        if tensor.ndim != 3 or tensor.shape[1] != tensor.shape[2]:
            raise ValueError(
                f"token matrices must have shape (n_tokens, n_states, n_states), got {tensor.shape}"
            )
        n_tokens, n_states, _ = tensor.shape
        if n_tokens < 1 or n_states < 1:
            raise ValueError(f"token matrices must be non-empty, got shape {tensor.shape}")
        row_sums = tensor.sum(axis=(0, 2))
        bad = np.flatnonzero(np.abs(row_sums - 1.0) > _SUM_ATOL)
        if bad.size:
            raise ValueError(
                "sum over tokens of T[k] must be row-stochastic; "
                f"row {bad[0]} sums to {row_sums[bad[0]]:.12g}"
            )
        tensor = tensor / row_sums[None, :, None]
        initial = _as_float_array(self.initial, "initial distribution")
        initial = _check_distribution(initial, n_states, "initial distribution")
        object.__setattr__(self, "token_matrices", _frozen(tensor))
        object.__setattr__(self, "initial", _frozen(initial))
        object.__setattr__(self, "transition_matrix", _frozen(tensor.sum(axis=0)))

    @classmethod
    def from_token_matrices(
        cls, token_matrices: object, initial: object | None = None, *, name: str = "hmm"
    ) -> HMMModel:
        """Model from T[k, i, j]; `initial=None` means the (unique) stationary distribution."""
        tensor = _as_float_array(token_matrices, "token matrices")
        if initial is None:
            provisional = cls(tensor, np.full(tensor.shape[-1], 1.0 / tensor.shape[-1]), name)
            initial = provisional.stationary_distribution()
        return cls(tensor, np.asarray(initial, dtype=np.float64), name)

    @classmethod
    def from_transition_emission(
        cls,
        transition: object,
        emission: object,
        initial: object | None = None,
        *,
        emitted_by: Literal["next", "current"] = "next",
        name: str = "hmm",
    ) -> HMMModel:
        """Model from a state chain P (s, s) and emissions E (s, k).

        `emitted_by="next"`: the token is emitted by the state entered, T[k, i, j] = P[i, j] E[j, k]
        (a Moore machine emitting on entry, as MESS3 does). `"current"`: by the state left,
        T[k, i, j] = E[i, k] P[i, j].
        """
        p = _as_float_array(transition, "transition matrix")
        e = _as_float_array(emission, "emission matrix")
        if p.ndim != 2 or p.shape[0] != p.shape[1]:
            raise ValueError(f"transition matrix must be square, got shape {p.shape}")
        if e.ndim != 2 or e.shape[0] != p.shape[0]:
            raise ValueError(
                f"emission matrix must have shape ({p.shape[0]}, n_tokens), got {e.shape}"
            )
        for what, matrix in (("transition", p), ("emission", e)):
            sums = matrix.sum(axis=1)
            bad = np.flatnonzero(np.abs(sums - 1.0) > _SUM_ATOL)
            if bad.size:
                raise ValueError(
                    f"{what} matrix rows must sum to 1; row {bad[0]} sums to {sums[bad[0]]:.12g}"
                )
        if emitted_by == "next":
            tensor = np.einsum("ij,jk->kij", p, e)
        elif emitted_by == "current":
            tensor = np.einsum("ik,ij->kij", e, p)
        else:
            raise ValueError(f"emitted_by must be 'next' or 'current', got {emitted_by!r}")
        return cls.from_token_matrices(tensor, initial, name=name)

    @property
    def n_states(self) -> int:
        return int(self.token_matrices.shape[1])

    @property
    def n_tokens(self) -> int:
        return int(self.token_matrices.shape[0])

    def stationary_distribution(self) -> np.ndarray:
        """The stationary distribution of the state chain; raises if it is not unique."""
        n = self.n_states
        generator = self.transition_matrix.T - np.eye(n)
        if np.linalg.matrix_rank(generator, tol=1e-10) != n - 1:
            raise ValueError(
                f"state chain of {self.name!r} has several stationary distributions; "
                "pass the initial distribution explicitly"
            )
        system = np.vstack([generator, np.ones((1, n))])
        target = np.zeros(n + 1)
        target[-1] = 1.0
        solution, *_ = np.linalg.lstsq(system, target, rcond=None)
        solution = np.clip(solution, 0.0, None)
        return solution / solution.sum()

    def state_entropy_rate(self) -> float:
        """Entropy rate of the hidden state chain in bits: -sum_i pi_i sum_j P_ij log2 P_ij."""
        p = self.transition_matrix
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(p > 0, p * np.log2(p), 0.0)
        return float(-(self.stationary_distribution() @ terms.sum(axis=1)))

    def entropy_rate(
        self, *, n_sequences: int = 256, n_steps: int = 2048, burn_in: int = 256, seed: int = 0
    ) -> float:
        """Entropy rate of the token process in bits, estimated by exact filtering.

        There is no closed form for a general HMM, so this averages the exact next-token
        entropy H(X_t+1 | X_1..t) along sampled stationary sequences (after `burn_in`
        steps); it is deterministic for a fixed `seed`. The standard error at the defaults
        is about 1e-3 bits for MESS3.
        """
        # Imported here: beliefs builds on this module.
        from rl_harness.envs.hmm.beliefs import next_token_probabilities, sampled_beliefs

        if not 0 <= burn_in < n_steps:
            raise ValueError(f"burn_in must be in [0, n_steps), got {burn_in}")
        _, beliefs = sampled_beliefs(self, n_sequences, n_steps, np.random.default_rng(seed))
        probs = next_token_probabilities(self, beliefs[:, burn_in:-1])
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.where(probs > 0, probs * np.log2(probs), 0.0).sum(axis=-1)
        return float(entropy.mean())

    def sample(
        self,
        n_steps: int,
        rng: np.random.Generator,
        *,
        n_sequences: int | None = None,
        initial_state: int | None = None,
    ) -> HMMSample:
        """Sample tokens and states; vectorized over sequences when `n_sequences` is given.

        The first state is drawn from `initial` unless `initial_state` is given.
        """
        if n_steps < 0:
            raise ValueError(f"n_steps must be non-negative, got {n_steps}")
        batch = 1 if n_sequences is None else int(n_sequences)
        if batch < 1:
            raise ValueError(f"n_sequences must be positive, got {n_sequences}")
        n = self.n_states
        if initial_state is None:
            state = CategoricalTable(self.initial).draw(np.zeros(batch, int), rng.random(batch))
        elif 0 <= initial_state < n:
            state = np.full(batch, initial_state, dtype=np.int64)
        else:
            raise ValueError(f"initial_state must be in [0, {n}), got {initial_state}")
        # Joint (token, next state) categorical per current state, flattened as k * n + j.
        joint = CategoricalTable(self.token_matrices.transpose(1, 0, 2).reshape(n, -1))
        tokens = np.empty((batch, n_steps), dtype=np.int64)
        states = np.empty((batch, n_steps + 1), dtype=np.int64)
        states[:, 0] = state
        uniforms = rng.random((n_steps, batch))
        for t in range(n_steps):
            tokens[:, t], state = np.divmod(joint.draw(state, uniforms[t]), n)
            states[:, t + 1] = state
        if n_sequences is None:
            return HMMSample(tokens=tokens[0], states=states[0])
        return HMMSample(tokens=tokens, states=states)

"""Product (factored) HMMs: independent factors run side by side as one `HMMModel`.

The joint model's token and state indices are C-order (row-major) flattenings of the
factors' indices, the first factor most significant: joint token = ravel((k_1, ..., k_n),
(K_1, ..., K_n)), and likewise for states. So

    T[k, i, j] = prod_f T_f[k_f, i_f, j_f],   initial = kron(initial_1, ..., initial_n),

and because the factors are independent the exact joint belief is the flattened outer
product of the factors' beliefs, each factor's belief being its marginal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rl_harness.envs.hmm.model import HMMModel


def _kron_all(arrays: list[np.ndarray]) -> np.ndarray:
    result = arrays[0]
    for array in arrays[1:]:
        result = np.kron(result, array)
    return result


@dataclass(frozen=True, eq=False)
class ProductHMM:
    """Independent `factors` and their joint `model` (built on construction).

    `model` is an ordinary `HMMModel`: the env, `filter_beliefs` and the mixed-state
    presentation take it as they take any model. The methods here map its joint tokens and
    beliefs to and from the factors'.
    """

    factors: tuple[HMMModel, ...]
    name: str | None = None
    model: HMMModel = field(init=False)

    def __post_init__(self) -> None:
        factors = tuple(self.factors)
        if not factors or not all(isinstance(f, HMMModel) for f in factors):
            raise ValueError("a product HMM needs at least one HMMModel factor")
        tensor = factors[0].token_matrices
        for factor in factors[1:]:
            # (K, S, S) x (K', S', S') -> (K K', S S', S S'), first factor most significant.
            k, s = tensor.shape[0] * factor.n_tokens, tensor.shape[1] * factor.n_states
            tensor = np.einsum("aij,bkl->abikjl", tensor, factor.token_matrices).reshape(k, s, s)
        name = self.name or " x ".join(f.name for f in factors)
        # The initial law is passed explicitly: a product of periodic chains (Z1R x Z1R) has
        # several stationary laws, and the product of the factors' initials is the right one.
        initial = _kron_all([f.initial for f in factors])
        object.__setattr__(self, "factors", factors)
        object.__setattr__(self, "model", HMMModel.from_token_matrices(tensor, initial, name=name))

    @property
    def token_shape(self) -> tuple[int, ...]:
        return tuple(f.n_tokens for f in self.factors)

    @property
    def state_shape(self) -> tuple[int, ...]:
        return tuple(f.n_states for f in self.factors)

    def factor_tokens(self, tokens: object) -> np.ndarray:
        """Joint token indices (...,) -> per-factor tokens (..., n_factors)."""
        array = np.asarray(tokens, dtype=np.int64)
        return np.stack(np.unravel_index(array, self.token_shape), axis=-1)

    def joint_tokens(self, factor_tokens: object) -> np.ndarray:
        """Per-factor tokens (..., n_factors) -> joint token indices (...,)."""
        array = np.asarray(factor_tokens, dtype=np.int64)
        if array.shape[-1:] != (len(self.factors),):
            raise ValueError(f"expected (..., {len(self.factors)}) tokens, got {array.shape}")
        result: np.ndarray = np.ravel_multi_index(
            tuple(np.moveaxis(array, -1, 0)), self.token_shape
        )
        return result

    def joint_belief(self, factor_beliefs: list[np.ndarray] | tuple[np.ndarray, ...]) -> np.ndarray:
        """Factors' beliefs, each (..., S_f) with one batch shape -> joint (..., prod S_f)."""
        if len(factor_beliefs) != len(self.factors):
            raise ValueError(f"{len(factor_beliefs)} beliefs for {len(self.factors)} factors")
        joint = np.asarray(factor_beliefs[0], dtype=np.float64)
        for belief in factor_beliefs[1:]:
            belief = np.asarray(belief, dtype=np.float64)
            joint = (joint[..., :, None] * belief[..., None, :]).reshape(*joint.shape[:-1], -1)
        return joint

    def factor_beliefs(self, beliefs: object) -> tuple[np.ndarray, ...]:
        """Joint beliefs (..., prod S_f) -> each factor's marginal belief (..., S_f)."""
        array = np.asarray(beliefs, dtype=np.float64)
        if array.shape[-1] != self.model.n_states:
            raise ValueError(f"expected (..., {self.model.n_states}) beliefs, got {array.shape}")
        grid = array.reshape(*array.shape[:-1], *self.state_shape)
        batch = array.ndim - 1
        n = len(self.factors)
        return tuple(grid.sum(axis=tuple(batch + g for g in range(n) if g != f)) for f in range(n))


def product_hmm(*factors: HMMModel, name: str | None = None) -> ProductHMM:
    """The product of independent `factors` (see `ProductHMM`)."""
    return ProductHMM(tuple(factors), name)

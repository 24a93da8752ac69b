"""Small textbook processes of computational mechanics, as `HMMModel`s (MESS3 lives in
`rl_harness.envs.mess3`, beside its tasks).

Both are edge-emitting (Mealy) and unifilar: the state left and the token fix the state
entered, so after synchronizing an observer knows the state. Both start from their
stationary distribution, and both are usable as env_config model factories
("rl_harness.envs.hmm.processes:zero_one_random_model").

- Zero-One-Random (Z1R): a cycle A -> B -> R -> A whose edge out of A emits 0, out of B
  emits 1 and out of R emits 0 or 1 with probability 1/2. Entropy rate 1/3 bit; the state
  chain is deterministic, so its state entropy rate is 0.
- RRXOR: two fair random bits, then their XOR, repeated. Five states: S (a block starts),
  "0" and "1" (the first bit drawn), "x0" and "x1" (the XOR due next). Entropy rate 2/3 bit.
"""

from __future__ import annotations

import numpy as np

from rl_harness.envs.hmm.model import HMMModel

Z1R_STATES = ("A", "B", "R")
RRXOR_STATES = ("S", "0", "1", "x0", "x1")


def zero_one_random_model() -> HMMModel:
    """Z1R: A -0-> B -1-> R -(0 or 1, 1/2 each)-> A, started uniform (its stationary law)."""
    a, b, r = range(3)
    tensor = np.zeros((2, 3, 3))
    tensor[0, a, b] = 1.0
    tensor[1, b, r] = 1.0
    tensor[0, r, a] = 0.5
    tensor[1, r, a] = 0.5
    return HMMModel.from_token_matrices(tensor, name="zero_one_random")


def rrxor_model() -> HMMModel:
    """RRXOR: S emits a fair bit u (-> state u), that state a fair bit v (-> x(u xor v)),
    which emits u xor v (-> S). Stationary law (1/3, 1/6, 1/6, 1/6, 1/6)."""
    s, first0, first1, xor0, xor1 = range(5)
    tensor = np.zeros((2, 5, 5))
    tensor[0, s, first0] = tensor[1, s, first1] = 0.5
    tensor[0, first0, xor0] = tensor[1, first0, xor1] = 0.5
    tensor[0, first1, xor1] = tensor[1, first1, xor0] = 0.5
    tensor[0, xor0, s] = 1.0
    tensor[1, xor1, s] = 1.0
    return HMMModel.from_token_matrices(tensor, name="rrxor")

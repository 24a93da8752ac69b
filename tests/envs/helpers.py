"""Brute-force references shared by the env tests: enumeration over words and state paths."""

from __future__ import annotations

import itertools

import numpy as np

from rl_harness.envs.hmm import HMMModel


def word_probabilities(model: HMMModel, length: int, initial: np.ndarray | None = None):
    """All token words of `length` with P(word) and the final exact belief, by forward sums."""
    start = model.initial if initial is None else initial
    words = np.array(list(itertools.product(range(model.n_tokens), repeat=length)), dtype=int)
    words = words.reshape(len(words), length)
    forward = np.tile(start, (len(words), 1))
    for t in range(length):
        forward = np.einsum("ni,nij->nj", forward, model.token_matrices[words[:, t]])
    probability = forward.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        belief = forward / probability[:, None]
    return words, probability, belief


def path_posterior(model: HMMModel, word: tuple[int, ...]) -> np.ndarray:
    """P(last state | word) by summing over every hidden state path (no recursion)."""
    s = model.n_states
    posterior = np.zeros(s)
    for path in itertools.product(range(s), repeat=len(word) + 1):
        weight = model.initial[path[0]]
        for t, token in enumerate(word):
            weight *= model.token_matrices[token, path[t], path[t + 1]]
        posterior[path[-1]] += weight
    return posterior / posterior.sum()


def conditional_entropy(model: HMMModel, length: int, initial: np.ndarray | None = None) -> float:
    """H(X_length | X_1..length-1) in bits, exactly, by enumerating all words."""
    _, probability, belief = word_probabilities(model, length - 1, initial)
    emit = model.token_matrices.sum(axis=2).T
    next_token = belief @ emit
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(next_token > 0, next_token * np.log2(next_token), 0.0)
    return float(-(probability * terms.sum(axis=1)).sum())


def random_model(rng: np.random.Generator, n_states: int, n_tokens: int) -> HMMModel:
    tensor = rng.random((n_tokens, n_states, n_states)) + 0.05
    tensor /= tensor.sum(axis=(0, 2))[None, :, None]
    initial = rng.dirichlet(np.ones(n_states))
    return HMMModel.from_token_matrices(tensor, initial, name="random")


def mess3_config(**overrides) -> dict:
    """A primitive env_config for MESS3 at the paper setting, with overrides."""
    config = {
        "model": "rl_harness.envs.mess3:mess3_model",
        "model_kwargs": {"x": 0.05, "alpha": 0.85},
        "task": "rl_harness.envs.mess3.tasks:NextTokenTask",
        "task_kwargs": {},
    }
    config.update(overrides)
    return config


ALL_INFO = ["token", "state_before", "state", "belief", "reward_components"]

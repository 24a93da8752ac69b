"""Masked cross-entropy and accuracy against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

from rl_harness.losses.classification import masked_accuracy, masked_cross_entropy


def test_cross_entropy_matches_the_formula_and_ignores_masked_steps():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, -5.0, 0.0]]])  # (1, 3, 3)
    targets = torch.tensor([[0, 2, 1]])
    mask = torch.tensor([[True, True, False]])
    expected = (-math.log(math.exp(2) / (math.exp(2) + 2)) - math.log(1 / (math.e + 2))) / 2
    assert masked_cross_entropy(logits, targets, mask).item() == pytest.approx(expected)
    # The masked-out step (a hopeless prediction) would raise the unmasked mean.
    assert masked_cross_entropy(logits, targets).item() > expected


def test_accuracy_counts_masked_in_hits_only():
    logits = torch.tensor([[3.0, 0.0], [0.0, 3.0], [3.0, 0.0], [3.0, 0.0]])
    targets = torch.tensor([0, 1, 1, 1])
    assert masked_accuracy(logits, targets).item() == 0.5
    assert masked_accuracy(logits, targets, torch.tensor([True, True, True, False])).item() == (
        pytest.approx(2 / 3)
    )


def test_all_masked_gives_zero_not_nan_and_keeps_the_graph():
    logits = torch.randn(4, 3, requires_grad=True)
    loss = masked_cross_entropy(logits, torch.zeros(4, dtype=torch.long), torch.zeros(4).bool())
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros(4, 3))


def test_shape_mismatches_are_explained():
    with pytest.raises(ValueError, match="logits"):
        masked_cross_entropy(torch.randn(4, 3), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="mask shape"):
        masked_cross_entropy(torch.randn(4, 3), torch.zeros(4, dtype=torch.long), torch.ones(2))

"""Masked classification losses and metrics (pure torch, no host syncs)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _flat_weights(mask: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    if mask is None:
        return None
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != targets shape {tuple(like.shape)}")
    return mask.reshape(-1).to(torch.float32)


def _masked_mean(values: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    if weights is None:
        return values.mean()
    # clamp: an all-masked batch gives 0, not NaN.
    return (values * weights).sum() / weights.sum().clamp_min(1.0)


def _checked(logits: torch.Tensor, targets: torch.Tensor) -> None:
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} must be targets {tuple(targets.shape)} + (classes,)"
        )


def masked_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean cross-entropy over positions where `mask` is true (all if None).

    logits (..., K), targets (...) integer classes, mask (...) bool.
    """
    _checked(logits, targets)
    ce = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long(), reduction="none"
    )
    return _masked_mean(ce, _flat_weights(mask, targets))


def masked_accuracy(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Fraction of masked-in positions whose argmax logit is the target."""
    _checked(logits, targets)
    hits = (logits.argmax(dim=-1) == targets.long()).reshape(-1).to(torch.float32)
    return _masked_mean(hits, _flat_weights(mask, targets))

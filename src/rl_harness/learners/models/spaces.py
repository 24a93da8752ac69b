"""Turning observation batches into float features and sizing action outputs.

Vectorized tensor code only: these run inside every forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F


def action_dist_input_dim(space: gym.Space) -> int:
    """Width of ACTION_DIST_INPUTS for RLlib's default torch distributions."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return 2 * int(space.shape[0])  # TorchDiagGaussian: means and log-stds
    raise ValueError(
        f"unsupported action space {space}: use Discrete or a 1-D Box "
        "(categorical or diagonal-Gaussian policies)"
    )


def flat_feature_dim(space: gym.Space) -> int:
    """Width of `flat_features` for one observation of `space`."""
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete) and len(space.shape) == 1:
        return int(np.sum(space.nvec))
    raise ValueError(
        f"unsupported observation space {space}: use a Box, Discrete or 1-D MultiDiscrete "
        "(flatten Dict/Tuple observations with a connector first)"
    )


def flat_features(obs: torch.Tensor, space: gym.Space, lead_dims: int) -> torch.Tensor:
    """(*lead, *obs_shape) -> (*lead, flat_feature_dim) float; discrete values one-hot."""
    lead = obs.shape[:lead_dims]
    if isinstance(space, gym.spaces.Box):
        return obs.reshape(*lead, -1).float()
    if isinstance(space, gym.spaces.Discrete):
        return F.one_hot(obs.long() - int(space.start), int(space.n)).float()
    if isinstance(space, gym.spaces.MultiDiscrete):
        sizes = [int(n) for n in space.nvec]
        codes = obs.long() - torch.as_tensor(space.start, device=obs.device)
        if len(set(sizes)) == 1:
            return F.one_hot(codes, sizes[0]).reshape(*lead, -1).float()
        parts = [F.one_hot(codes[..., i], n) for i, n in enumerate(sizes)]
        return torch.cat(parts, dim=-1).float()
    raise ValueError(f"unsupported observation space {space}")


@dataclass(frozen=True)
class WindowLayout:
    """How an observation becomes a transformer window.

    Either `width` positions of `feature_dim` floats, or (tokens=True) `width`
    integer token ids below `feature_dim`.
    """

    width: int
    feature_dim: int
    tokens: bool


def window_layout(space: gym.Space, context_len: int | None) -> WindowLayout:
    """Read the window layout from the observation space.

    Box (W, D): W positions of D features. Box (W * D,) with context_len = W:
    the same, flattened. MultiDiscrete of shape (W,) with one shared size V:
    W tokens in [0, V).
    """
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 2:
        width, dim = (int(s) for s in space.shape)
    elif isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        size = int(space.shape[0])
        if context_len is None or size % context_len != 0:
            raise ValueError(
                f"a flat Box observation of size {size} needs model_config['context_len'] "
                f"dividing it (positions in the window), got {context_len!r}"
            )
        width, dim = context_len, size // context_len
    elif isinstance(space, gym.spaces.MultiDiscrete) and len(space.shape) == 1:
        sizes = {int(n) for n in space.nvec}
        if len(sizes) != 1 or np.any(space.start != 0):
            raise ValueError(
                f"token-window observations need one vocabulary starting at 0, got {space}"
            )
        width, dim = int(space.shape[0]), sizes.pop()
        return _checked(WindowLayout(width, dim, tokens=True), context_len)
    else:
        raise ValueError(
            f"unsupported observation space {space} for a window model: use Box (W, D), "
            "Box (W * D,) with model_config['context_len'] = W, or MultiDiscrete (W,)"
        )
    return _checked(WindowLayout(width, dim, tokens=False), context_len)


def _checked(layout: WindowLayout, context_len: int | None) -> WindowLayout:
    if context_len is not None and context_len != layout.width:
        raise ValueError(
            f"model_config['context_len'] = {context_len} does not match the observation "
            f"window of {layout.width} positions"
        )
    return layout


def window_inputs(obs: torch.Tensor, layout: WindowLayout) -> torch.Tensor:
    """(B, *obs_shape) -> (B, W) long tokens or (B, W, D) float features."""
    if layout.tokens:
        return obs.long()
    return obs.reshape(obs.shape[0], layout.width, layout.feature_dim).float()

"""Turning observation batches into float features and sizing action outputs.

Vectorized tensor code only: these run inside every forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F


def action_dist_input_dim(space: gym.Space[Any]) -> int:
    """Width of ACTION_DIST_INPUTS for RLlib's default torch distributions."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return 2 * int(space.shape[0])  # TorchDiagGaussian: means and log-stds
    raise ValueError(
        f"unsupported action space {space}: use Discrete or a 1-D Box "
        "(categorical or diagonal-Gaussian policies)"
    )


def flat_feature_dim(space: gym.Space[Any]) -> int:
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


def flat_features(obs: torch.Tensor, space: gym.Space[Any], lead_dims: int) -> torch.Tensor:
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

    Either `width` positions of `feature_dim` floats, or (tokens=True) `width` integer
    token ids below `feature_dim`. With `keys` (a Dict observation), position p is the
    concatenation of every named key's row p, in the order of `keys`.
    """

    width: int
    feature_dim: int
    tokens: bool
    keys: tuple[str, ...] = ()


def window_layout(
    space: gym.Space[Any],
    context_len: int | None,
    feature_dim: int | None = None,
    window_keys: tuple[str, ...] | None = None,
) -> WindowLayout:
    """Read the window layout from the observation space; nothing is guessed.

    Box (W, D): W positions of D features. Box (W * D,): needs context_len = W and
    feature_dim = D (a flat vector does not say where one position ends; the HMM env's
    flat observation is its whole token window, then its whole action window, never
    (token, action) pairs). MultiDiscrete of shape (W,) with one shared size V: W tokens
    in [0, V). Dict: `window_keys` name the keys that form each position, each a Box
    (W, D_k) with the same W; position p is their rows p concatenated.
    """
    if isinstance(space, gym.spaces.Dict):
        return _dict_layout(space, context_len, window_keys)
    if window_keys is not None:
        raise ValueError(
            f"model_config['window_keys'] names keys of a Dict observation, but the "
            f"observation space is {space}"
        )
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 2:
        width, dim = (int(s) for s in space.shape)
    elif isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        size = int(space.shape[0])
        if context_len is None or feature_dim is None or context_len * feature_dim != size:
            raise ValueError(
                f"a flat Box observation of {size} floats is read as a window only when "
                f"model_config['context_len'] * model_config['feature_dim'] = {size} (got "
                f"context_len {context_len!r}, feature_dim {feature_dim!r}): positions are "
                "never guessed. The HMM env's flat observation is its token window, then its "
                "action window and beliefs: for a token window alone use feature_dim = "
                "n_tokens; for (token, action) positions set env_config "
                "'dict_observation': true and model_config 'window_keys': ['tokens', 'actions']"
            )
        width, dim = context_len, feature_dim
    elif isinstance(space, gym.spaces.MultiDiscrete) and len(space.shape) == 1:
        sizes = {int(n) for n in space.nvec}
        if len(sizes) != 1 or np.any(space.start != 0):
            raise ValueError(
                f"token-window observations need one vocabulary starting at 0, got {space}"
            )
        width, dim = int(space.shape[0]), sizes.pop()
        return _checked(WindowLayout(width, dim, tokens=True), context_len, feature_dim)
    else:
        raise ValueError(
            f"unsupported observation space {space} for a window model: use Box (W, D), "
            "Box (W * D,) with model_config['context_len'] = W and ['feature_dim'] = D, "
            "MultiDiscrete (W,), or a Dict with model_config['window_keys']"
        )
    return _checked(WindowLayout(width, dim, tokens=False), context_len, feature_dim)


def _dict_layout(
    space: gym.spaces.Dict, context_len: int | None, window_keys: tuple[str, ...] | None
) -> WindowLayout:
    if not window_keys:
        raise ValueError(
            f"a Dict observation (keys {sorted(space.spaces)}) needs "
            "model_config['window_keys']: the keys whose rows form each position, in order"
        )
    shapes = {}
    for key in window_keys:
        part = space.spaces.get(key)
        if part is None:
            raise ValueError(
                f"model_config['window_keys'] names {key!r}, which the observation lacks "
                f"(keys {sorted(space.spaces)})"
            )
        if not isinstance(part, gym.spaces.Box) or len(part.shape) != 2:
            raise ValueError(
                f"window key {key!r} must be a Box of shape (positions, features), got {part}"
            )
        shapes[key] = tuple(int(s) for s in part.shape)
    widths = {shape[0] for shape in shapes.values()}
    if len(widths) != 1:
        raise ValueError(f"window keys must have the same number of positions, got {shapes}")
    layout = WindowLayout(
        widths.pop(),
        sum(shape[1] for shape in shapes.values()),
        tokens=False,
        keys=tuple(window_keys),
    )
    return _checked(layout, context_len, None)


def _checked(
    layout: WindowLayout, context_len: int | None, feature_dim: int | None
) -> WindowLayout:
    if context_len is not None and context_len != layout.width:
        raise ValueError(
            f"model_config['context_len'] = {context_len} does not match the observation "
            f"window of {layout.width} positions"
        )
    if feature_dim is not None and feature_dim != layout.feature_dim:
        raise ValueError(
            f"model_config['feature_dim'] = {feature_dim} does not match the observation's "
            f"{layout.feature_dim} features per position"
        )
    return layout


def window_inputs(
    obs: torch.Tensor | dict[str, torch.Tensor], layout: WindowLayout
) -> torch.Tensor:
    """(B, *obs_shape) -> (B, W) long tokens or (B, W, D) float features; a Dict
    observation's window keys are concatenated per position."""
    if layout.keys:
        assert isinstance(obs, dict)
        return torch.cat([obs[key].float() for key in layout.keys], dim=-1)
    assert isinstance(obs, torch.Tensor)
    if layout.tokens:
        return obs.long()
    return obs.reshape(obs.shape[0], layout.width, layout.feature_dim).float()

"""The policy's action read from its heads' outputs, and how much of it an action transform
clips.

Actions (`policy_actions`): for a Box action space the distribution's mean (the greedy
action) through the rollouts' `action_transform` (env units: RLlib's unsquashing clips, so
a saturated action cannot move); for a Discrete one the action probabilities (the mean of
the one-hot action), against an optimal policy that returns probabilities.

Before saturation (Box actions): the policy head is linear, so the shift of the
distribution's mean before the transform is what the edit did to the policy, saturated or
not. `belief_interventions` scores it too (`EditScores.pre_clip`), mapped to env units by
`pre_clip_transform` (the transform without its clipping, e.g.
`rllib_action_transform(space, unclipped=True)`; none: the mean's own units), and reports
`clipped_fraction`: the fraction of action coordinates the transform saturates (where it
differs from its unclipped version), unedited and after each edit. A policy that moves
fully before the clip but is saturated reads fraction 1 before and less after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from rl_harness.analysis.rollouts import ActionTransform

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule


def is_box(space: Any) -> bool:
    import gymnasium as gym

    return isinstance(space, gym.spaces.Box)


def policy_actions(
    module: RLModule,
    action_inputs: np.ndarray,
    action_transform: ActionTransform | None = None,
) -> np.ndarray:
    """(..., A) the policy's action for (..., A_in) distribution inputs: for a Box action
    space the distribution's mean (its deterministic action) through `action_transform`
    (the rollouts' own, e.g. `rllib_action_transform(space)`: env units); for a Discrete one
    the action probabilities."""
    import gymnasium as gym

    inputs = np.asarray(action_inputs)
    flat = torch.as_tensor(inputs.reshape(-1, inputs.shape[-1]))
    space = module.action_space
    if isinstance(space, gym.spaces.Discrete):
        actions = torch.softmax(flat.double(), dim=-1).numpy()
    elif isinstance(space, gym.spaces.Box):
        dist = module.get_inference_action_dist_cls().from_logits(flat)
        # A torch module's distribution: its sample is a Tensor.
        mean = cast(torch.Tensor, dist.to_deterministic().sample())
        actions = mean.double().numpy()
        if action_transform is not None:
            actions = np.asarray(action_transform(actions), dtype=np.float64)
    else:
        raise TypeError(f"interventions read Discrete or Box actions, got {space}")
    return actions.reshape(*inputs.shape[:-1], -1)


def clipped_fraction(
    raw_actions: np.ndarray,
    action_transform: ActionTransform | None,
    pre_clip_transform: ActionTransform | None,
) -> float:
    """The fraction of (..., A) pre-transform Box actions' coordinates that
    `action_transform` saturates: where its output differs from `pre_clip_transform`'s (the
    same map without clipping); a missing transform is the identity."""
    raw = np.asarray(raw_actions, dtype=np.float64)
    flat = raw.reshape(-1, raw.shape[-1])
    post = flat if action_transform is None else action_transform(flat)
    pre = flat if pre_clip_transform is None else pre_clip_transform(flat)
    post, pre = np.asarray(post, np.float64), np.asarray(pre, np.float64)
    return float(np.mean(~np.isclose(post, pre, rtol=1e-5, atol=1e-6)))

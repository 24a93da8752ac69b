"""Connector pieces that give a module the agent's previous action as a batch column.

RLlib's own PrevActionsPrevRewards turns the observation into a Dict and handles
Discrete actions only; this piece leaves observations alone and writes one column,
`prev_actions`: the action taken before each step (zeros before an episode's first
action), one-hot for Discrete, as sampled for a Box. Install it on both sides:

    config.env_runners(env_to_module_connector=prev_action_env_to_module)
    config.learners(learner_connector=prev_action_learner)

RLlib's default pieces run after it, so the column gets the time dim and zero
padding like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.utils.annotations import override

PREV_ACTIONS = "prev_actions"


class PrevActionToBatch(ConnectorV2):
    """Writes `prev_actions`: per acting step (env-to-module) or per episode step (learner)."""

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        as_learner_connector: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self._as_learner_connector = as_learner_connector

    @override(ConnectorV2)
    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        for episode in self.single_agent_episode_iterator(
            episodes, agents_that_stepped_only=not self._as_learner_connector
        ):
            if self._as_learner_connector:
                # Step t's previous action is action t - 1 (the lookback buffer holds
                # the one before a chunk's start; zeros at an episode's start).
                length = len(episode)
                prev = episode.get_actions(
                    indices=slice(-1, length - 1),
                    neg_index_as_lookback=True,
                    fill=0.0,
                    one_hot_discrete=True,
                )
                prev = np.asarray(prev, np.float32).reshape(length, -1)
                self.add_n_batch_items(batch, PREV_ACTIONS, list(prev), length, episode)
            else:
                prev = episode.get_actions(indices=slice(-1, None), fill=0.0, one_hot_discrete=True)
                item = np.asarray(prev, np.float32).reshape(-1)
                self.add_batch_item(batch, PREV_ACTIONS, item, episode)
        return batch


def prev_action_env_to_module(env: Any = None, spaces: Any = None, device: Any = None) -> Any:
    """`config.env_runners(env_to_module_connector=...)` factory."""
    return PrevActionToBatch()


def prev_action_learner(input_observation_space: Any = None, input_action_space: Any = None) -> Any:
    """`config.learners(learner_connector=...)` factory."""
    return PrevActionToBatch(as_learner_connector=True)

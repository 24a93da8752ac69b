"""Acting connector pieces that work on the whole vector step: fewer per-step Python hops.

RLlib's default single-agent acting pipelines handle each step item by item: on the
env-to-module side `AddObservationsFromEpisodesToBatch` files one observation per episode
under its episode id and `BatchIndividualItems` stacks them again; on the module-to-env side
`UnBatchToIndividualItems` splits every output column into per-episode dicts through
`tree` (per row, per leaf), `RemoveSingleTsTimeRankFromBatch` walks them once more and
`ListifyDataForVectorEnv` flattens them back into per-env lists (and re-stacks the actions).
With 32 envs that is most of the connectors' time per vector step.

- `BatchedObservations` (env-to-module) does the first two in one pass: OBS = the stack of
  each episode's last observation, in the episodes' order, and RLlib's
  `memorized_map_structure` (the episode id of every row) in `shared_data`.
- `ListifyBatch` (module-to-env) does the last three in one pass: every column becomes the
  list of its rows (row i for env i, as the env runner reads them), ACTIONS and
  ACTIONS_FOR_ENV stay the batched arrays the vector env steps with.

- `UntimedPipeline` runs a list of pieces as one piece of RLlib's pipeline. RLlib's
  `ConnectorPipelineV2` times every piece it holds on every call (a `MetricsLogger` timer
  and a regex snake-casing of the piece's class name per piece per vector step: ~0.05 ms
  each, ~6% of the flagship's sampling CPU over its 8 acting pieces); inside this one the
  pieces run in the same order on the same arguments, and RLlib times the whole pipeline
  as one piece. Only the env runner's per-piece connector timer metrics go (the
  harness's compact metrics drop every connector timer anyway).

Both give the env runner the same values, in the same order and of the same types as
RLlib's pieces (tests/study/test_batched_sampling.py runs both pipelines side by side and
compares every stored episode). Single-agent only; a batch they cannot handle (a time rank
added by RLlib's time-dim piece, rows that are not one per episode) fails loudly.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from ray.rllib.connectors.common import NumpyToTensor, TensorToNumpy
from ray.rllib.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.module_to_env import GetActions
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.annotations import override
from ray.rllib.utils.spaces.space_utils import batch as batch_structures
from ray.rllib.utils.spaces.space_utils import unbatch

MEMORIZED = "memorized_map_structure"  # RLlib's shared_data key: the episode id of each row


class BatchedObservations(ConnectorV2):
    """Env-to-module: OBS = the episodes' last observations stacked (one row per episode, in
    their order), and `shared_data["memorized_map_structure"]` = their ids, as RLlib's
    `AddObservationsFromEpisodesToBatch` + `BatchIndividualItems` leave them. Put it where
    those two would go (before `NumpyToTensor`)."""

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
        if Columns.OBS in batch:
            return batch
        if not episodes or not isinstance(episodes[0], SingleAgentEpisode):
            raise TypeError("BatchedObservations handles single-agent episodes only")
        observations = [episode.get_observations(-1) for episode in episodes]
        if all(isinstance(o, np.ndarray) for o in observations):
            batch[Columns.OBS] = np.stack(observations)
        else:  # nested (Dict/Tuple) observations: RLlib's own batching of structures
            batch[Columns.OBS] = batch_structures(observations)
        if shared_data is not None:
            shared_data[MEMORIZED] = [episode.id_ for episode in episodes]
        return batch


def _rows(data: Any, count: int) -> list[Any]:
    """The `count` rows of one batched column, as RLlib's `unbatch` gives them (row i of an
    array, a dict of arrays per row); anything else through `unbatch` itself."""
    if isinstance(data, np.ndarray):
        rows = list(data)
    elif isinstance(data, dict) and all(isinstance(v, np.ndarray) for v in data.values()):
        rows = [dict(zip(data, values, strict=True)) for values in zip(*data.values(), strict=True)]
    else:
        rows = unbatch(data)
    if len(rows) != count:
        raise ValueError(f"ListifyBatch: a column has {len(rows)} rows for {count} envs")
    return rows


class ListifyBatch(ConnectorV2):
    """Module-to-env, on the batched numpy output (after `TensorToNumpy` and the actions'
    unsquash/clip): every column the list of its rows, one per env in the env-to-module
    rows' order; ACTIONS and ACTIONS_FOR_ENV stay batched arrays. Replaces RLlib's
    `UnBatchToIndividualItems`, `RemoveSingleTsTimeRankFromBatch` and
    `ListifyDataForVectorEnv` for single-agent acting without a time rank."""

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
        shared_data = {} if shared_data is None else shared_data
        if shared_data.get("_added_single_ts_time_rank"):
            raise ValueError(
                "ListifyBatch expects acting batches without a time rank (no "
                "AddTimeDimToBatchAndZeroPad in the env-to-module pipeline)"
            )
        memorized = shared_data.get(MEMORIZED)
        if not isinstance(memorized, list) or len(memorized) != len(episodes):
            raise ValueError(
                "ListifyBatch needs one row per episode (shared_data"
                f"[{MEMORIZED!r}] from BatchedObservations or BatchIndividualItems)"
            )
        count = len(episodes)
        for column, data in list(batch.items()):
            if column in (Columns.ACTIONS, Columns.ACTIONS_FOR_ENV):
                # The vector env steps with the batched actions (what RLlib re-batches from
                # the rows: the same values).
                continue
            batch[column] = _rows(data, count)
        return batch


class UntimedPipeline(ConnectorPipelineV2):
    """Its pieces, in order, as one piece of RLlib's connector pipeline: the same calls
    on the same arguments as RLlib's pipeline makes, without the per-piece timers RLlib's
    pipeline logs on every call (`metrics` is not handed on; none of the acting pieces
    here log metrics). Spaces, state and checkpoints are `ConnectorPipelineV2`'s."""

    @override(ConnectorPipelineV2)
    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict[str, Any] | None = None,
        metrics: Any = None,
        **kwargs: Any,
    ) -> Any:
        shared_data = {} if shared_data is None else shared_data
        kwargs.pop("data", None)  # the outer pipeline's copy of `batch` (a deprecated name)
        for connector in self.connectors:
            batch = connector(
                rl_module=rl_module,
                batch=batch,
                episodes=episodes,
                explore=explore,
                shared_data=shared_data,
                metrics=None,
                data=batch,  # as RLlib's pipeline passes it
                **kwargs,
            )
            if not isinstance(batch, dict):
                raise ValueError(f"connector piece {connector} returned {batch!r}, not a dict")
        return batch


def one_piece(pieces: list[ConnectorV2], untimed: bool) -> list[ConnectorV2]:
    """`pieces` as the one `UntimedPipeline` (untimed) or as they are (RLlib times each)."""
    return [UntimedPipeline(connectors=pieces)] if untimed else pieces


def batched_env_to_module(
    env: Any = None, spaces: Any = None, device: Any = None, *, untimed: bool = True
) -> list[ConnectorV2]:
    """`config.env_runners(env_to_module_connector=..., add_default_connectors_to_env_to_
    module_pipeline=False)` for a stateless single-agent module: RLlib's default pieces
    for such a module (observations batched, then tensors), the batching in one pass.
    `untimed` (default): as one `UntimedPipeline`; False: pieces RLlib times each step."""
    return one_piece([BatchedObservations(), NumpyToTensor(device=device)], untimed)


def batched_module_to_env(
    env: Any = None,
    spaces: Any = None,
    *,
    normalize_actions: bool = True,
    clip_actions: bool = False,
    untimed: bool = True,
) -> list[ConnectorV2]:
    """`config.env_runners(module_to_env_connector=..., add_default_connectors_to_module_
    to_env_pipeline=False)` for a stateless single-agent module: RLlib's default pieces
    (actions sampled, numpy, unsquashed/clipped as the config says), the unbatching in
    one pass. `untimed` (default): as one `UntimedPipeline`; False: separate pieces."""
    # Here, not at the top: kv_cache imports this module's pieces.
    from rl_harness.learners.connectors.kv_cache import BatchedNormalizeAndClipActions

    pieces: list[ConnectorV2] = [
        GetActions(),
        TensorToNumpy(),
        BatchedNormalizeAndClipActions(
            normalize_actions=normalize_actions, clip_actions=clip_actions
        ),
        ListifyBatch(),
    ]
    return one_piece(pieces, untimed)


def batched_acting(config: Any, *, untimed: bool = True) -> Any:
    """Install the batched acting pipelines on a single-agent config of a stateless module
    whose env runners use RLlib's default connectors (in place; returns it). The sampled
    episodes are the same as with RLlib's pipelines. `untimed` (default): each side's
    pieces as one `UntimedPipeline`; False: separate pieces (RLlib times each). A stateful
    module with per-step K/V storage gets them from `store_kv_steps` instead; a config with
    its own acting connectors is refused (they would be dropped)."""
    if config.is_multi_agent:
        raise ValueError("batched_acting: single-agent configs only")
    if config._env_to_module_connector is not None or config._module_to_env_connector is not None:
        raise ValueError(
            "batched_acting: this config has its own acting connectors; it installs RLlib's "
            "default pieces only (a stateful K/V module: use store_kv_steps)"
        )
    config.env_runners(
        env_to_module_connector=(
            batched_env_to_module
            if untimed
            else functools.partial(batched_env_to_module, untimed=False)
        ),
        add_default_connectors_to_env_to_module_pipeline=False,
        module_to_env_connector=functools.partial(
            batched_module_to_env,
            normalize_actions=config.normalize_actions,
            clip_actions=config.clip_actions,
            **({} if untimed else {"untimed": False}),
        ),
        add_default_connectors_to_module_to_env_pipeline=False,
    )
    return config

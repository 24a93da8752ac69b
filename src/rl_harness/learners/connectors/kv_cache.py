"""Per-step K/V storage for `StatefulTransformerActorCritic`: episodes keep each step's new
key/value only, and the cache a training chunk starts from is rebuilt from them.

Without these pieces RLlib stores the module's whole STATE_OUT, the K/V cache of the last
`context - 1` steps, at every env step (145 KB per step at the study's size: ~4.7 GB per
32,768-step batch, copied again when episodes are numpy'd and extended for GAE). With them:

- acting (env runner): `KVStepsToEpisodes` (module-to-env) keeps the whole cache out of the
  episode: it stores only the step's new key and value (STATE_OUT {"k_step", "v_step"}:
  (num_layers, d_model) each, 2.3 KB at that size) and holds the whole batched cache in the
  env runner's `shared_data` for the next step, where `KVCacheStateIn` (env-to-module) hands
  it to the module as STATE_IN as it is (rows regathered only when an episode was reset).
  Both work on whole batches: no per-episode copies of the cache per step. Acting stays one
  step of attention over the cache.
- a cut episode chunk (the env runner cuts ongoing episodes at the end of each `sample()`)
  carries the cache it starts from in `episode.custom_data["kv_cache_start"]` (RLlib copies
  custom_data along with the episode), once per chunk.
- training (learner): `KVCacheChunkStarts` rebuilds the cache each `max_seq_len` chunk
  starts from: the chunk start cache plus the stored per-step keys/values before it. The
  result equals, bit for bit, the cache acting had at that step (tests/learners/
  test_kv_cache.py), so training sees exactly what acting saw. The batch holds one cache per
  chunk, not one per step.

Install all of it with `store_kv_steps(config)` (single-agent configs). It sets the
env runners' connectors (both pipelines are built here from RLlib's default pieces: on the
env-to-module side `KVCacheStateIn` in place of `AddStatesFromEpisodesToBatch`, which must
come after `AddTimeDimToBatchAndZeroPad`; on the module-to-env side `KVStepsToEpisodes`
before `TensorToNumpy` and the actions unsquashed/clipped for the whole batch at once), and
the learner class: `KVCacheLearnerMixin` inserts
`KVCacheChunkStarts` after RLlib's `AddTimeDimToBatchAndZeroPad` in `Learner.build` (a
prepended learner connector piece cannot write STATE_IN: RLlib's time-dim piece skips the
whole batch once STATE_IN is in it). Without `store_kv_steps` RLlib stores the module's
whole cache at every step: a run through the harness is refused before Ray starts
(`check_kv_steps_installed`, asked by the module's `check_algorithm_config` in the harness's
preflight) unless the module's model_config opts out (`"whole_cache_per_step": True`, for
tests and comparisons with RLlib's own path); a half-installed setup fails with a message
naming this function instead of training on the wrong context.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.common import (
    AddObservationsFromEpisodesToBatch,
    AddTimeDimToBatchAndZeroPad,
    BatchIndividualItems,
    NumpyToTensor,
    TensorToNumpy,
)
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import GeneralAdvantageEstimation
from ray.rllib.connectors.module_to_env import (
    GetActions,
    ListifyDataForVectorEnv,
    NormalizeAndClipActions,
    RemoveSingleTsTimeRankFromBatch,
    UnBatchToIndividualItems,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.utils.annotations import override
from ray.rllib.utils.spaces.space_utils import clip_action, unsquash_action

from rl_harness.learners.connectors.batched_acting import (
    BatchedObservations,
    ListifyBatch,
    one_piece,
)
from rl_harness.learners.connectors.prev_action import PrevActionToBatch

K_STEP = "k_step"  # STATE_OUT stored per step: the step's new keys (num_layers, d_model)
V_STEP = "v_step"  # and values
KV_CACHE_START = "kv_cache_start"  # episode.custom_data: the cache a cut chunk starts from
_STASH = "kv_cache/state_out"  # shared_data: the batched cache after the last step
_STATE_IN = "kv_cache/state_in"  # shared_data: the batched cache this step read

INSTALL_HINT = "install the per-step K/V pieces with rl_harness.learners.models.store_kv_steps"
# model_config key of the stateful transformer: True keeps RLlib's storage of the whole
# cache at every env step (no store_kv_steps); the opt-out for tests and comparisons.
WHOLE_CACHE_PER_STEP = "whole_cache_per_step"


def _single_module(rl_module: Any, episode: Any) -> Any:
    if isinstance(rl_module, MultiRLModule):
        return rl_module[episode.module_id or DEFAULT_MODULE_ID]
    return rl_module


def _fresh(episode: Any) -> bool:
    """An episode that has not stepped since its reset: it starts from the initial state."""
    return episode.t_started == 0 and len(episode) == 0


class KVCacheStateIn(ConnectorV2):
    """Env-to-module: STATE_IN = the whole cache after each episode's last step (the
    initial state after a reset), batched, on the batch's device. Goes last, after RLlib's
    `NumpyToTensor` (see `kv_cache_env_to_module`): rows follow the episodes in the order
    RLlib's `BatchIndividualItems` batched them (its `memorized_map_structure`).

    When the rows are the same episodes as at the last step (every step without a reset),
    STATE_IN is the module's batched cache out as it is: no per-episode copies."""

    def __init__(self, *args: Any, device: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._device = device

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
        if rl_module is None or not rl_module.is_stateful() or Columns.STATE_IN in batch:
            return batch
        shared_data = {} if shared_data is None else shared_data
        ids = list(shared_data.get("memorized_map_structure") or [])
        by_id = {e.id_: e for e in self.single_agent_episode_iterator(episodes)}
        if not ids or any(not isinstance(i, str) or i not in by_id for i in ids):
            raise RuntimeError(
                "KVCacheStateIn needs single-agent rows from RLlib's BatchIndividualItems "
                "before it (memorized_map_structure); " + INSTALL_HINT
            )
        stash: _Stash | None = shared_data.get(_STASH)
        fresh = [_fresh(by_id[i]) for i in ids]
        if stash is not None and stash.ids == ids and not any(fresh):
            state = stash.state
        else:
            state = self._gather(rl_module, by_id, ids, fresh, stash)
        shared_data[_STATE_IN] = _Stash(ids, state)
        batch[Columns.STATE_IN] = state
        return batch

    def _gather(
        self,
        rl_module: Any,
        by_id: dict[str, Any],
        ids: list[str],
        fresh: list[bool],
        stash: _Stash | None,
    ) -> dict[str, torch.Tensor]:
        """Rows from the last step's cache, the initial state where an episode is fresh."""
        previous = {} if stash is None else {i: row for row, i in enumerate(stash.ids)}
        rows = []
        for episode_id, is_fresh in zip(ids, fresh, strict=True):
            if not is_fresh and episode_id not in previous:
                episode = by_id[episode_id]
                raise RuntimeError(
                    f"no K/V cache kept for ongoing episode {episode_id!r} (t={episode.t}): "
                    "KVStepsToEpisodes must run in the module-to-env pipeline; " + INSTALL_HINT
                )
            rows.append(-1 if is_fresh else previous[episode_id])
        initial = {
            key: torch.from_numpy(value).to(self._device)
            for key, value in _single_module(rl_module, by_id[ids[0]]).get_initial_state().items()
        }
        index = torch.tensor(rows, device=self._device)
        kept = index >= 0  # rows carried over; the rest start from the initial state
        state = {}
        for key, value in initial.items():
            rows_of = value.expand(len(ids), *value.shape).clone()
            if stash is not None and kept.any():
                rows_of[kept] = stash.state[key].index_select(0, index[kept]).to(value.dtype)
            state[key] = rows_of
        return state


@dataclass
class _Stash:
    """A batched cache and the episode id of each of its rows."""

    ids: list[str]
    state: dict[str, torch.Tensor]


class KVStepsToEpisodes(ConnectorV2):
    """Module-to-env, on the module's batched output (before RLlib's `TensorToNumpy`;
    `kv_steps_module_to_env` puts it there): stores each step's new key/value only
    (STATE_OUT {"k_step", "v_step"}: (B, num_layers, d_model)), keeps the whole batched
    cache out in `shared_data` for `KVCacheStateIn`, and gives a cut chunk's first step
    the cache acting read in `episode.custom_data`."""

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
        if Columns.STATE_OUT not in batch or shared_data is None:
            return batch
        state = batch[Columns.STATE_OUT]
        read: _Stash | None = shared_data.get(_STATE_IN)
        if not isinstance(state, dict) or not torch.is_tensor(state.get("k")) or read is None:
            raise ValueError(
                "KVStepsToEpisodes reads the module's batched K/V cache out (before "
                "TensorToNumpy) after KVCacheStateIn built STATE_IN; " + INSTALL_HINT
            )
        # Copies: a view would keep the whole batched cache alive in the episodes.
        batch[Columns.STATE_OUT] = {
            K_STEP: state["k"][:, :, -1].clone(),
            V_STEP: state["v"][:, :, -1].clone(),
        }
        shared_data[_STASH] = _Stash(read.ids, state)
        by_id = {episode.id_: episode for episode in episodes}
        for row, episode_id in enumerate(read.ids):
            episode = by_id.get(episode_id)
            if episode is not None and len(episode) == 0 and episode.t_started > 0:
                # A cut chunk's first step: the cache it starts from is what acting read.
                episode.custom_data[KV_CACHE_START] = {
                    "t": episode.t_started,
                    **{name: value[row].cpu().numpy().copy() for name, value in read.state.items()},
                }
        return batch


class BatchedNormalizeAndClipActions(NormalizeAndClipActions):
    """Module-to-env, on the batched numpy output (after `TensorToNumpy`, before the
    unbatching): RLlib's `NormalizeAndClipActions` (its settings and action-space struct)
    for the whole batch at once, with RLlib's own `unsquash_action` / `clip_action`
    (elementwise, so the same numbers as per item). ACTIONS stay as sampled;
    ACTIONS_FOR_ENV go to the env."""

    @override(NormalizeAndClipActions)
    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any] | None,
        episodes: list[Any],
        explore: bool | None = None,
        shared_data: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        if batch is None:  # RLlib's signature allows it; the module's output always comes
            raise ValueError("BatchedNormalizeAndClipActions needs the module's output batch")
        if self.normalize_actions:
            batch[Columns.ACTIONS_FOR_ENV] = unsquash_action(
                copy.deepcopy(batch[Columns.ACTIONS]), self._action_space_struct
            )
        elif self.clip_actions:
            batch[Columns.ACTIONS_FOR_ENV] = clip_action(
                copy.deepcopy(batch[Columns.ACTIONS]), self._action_space_struct
            )
        return batch


class KVCacheChunkStarts(ConnectorV2):
    """Learner: STATE_IN for every `max_seq_len` chunk, rebuilt from the stored per-step
    keys/values and the chunk start cache. Goes right after RLlib's
    `AddTimeDimToBatchAndZeroPad` (`KVCacheLearnerMixin` puts it there); RLlib's
    `AddStatesFromEpisodesToBatch` then finds STATE_IN and does nothing."""

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
        if Columns.STATE_IN in batch:
            return batch
        for episode in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            outputs = episode.extra_model_outputs
            if Columns.STATE_OUT not in outputs:
                continue
            stored = episode.get_extra_model_outputs(key=Columns.STATE_OUT)
            module = _single_module(rl_module, episode)
            if not isinstance(stored, dict) or K_STEP not in stored:
                if getattr(module, WHOLE_CACHE_PER_STEP, False):
                    continue  # opted out: RLlib's own piece reads the whole caches stored
                raise RuntimeError(
                    f"episode {episode.id_!r} stores the whole K/V cache at every step: the "
                    "learner has KVCacheLearnerMixin but the env runners lack the per-step "
                    "pieces; " + INSTALL_HINT
                )
            if Columns.NEXT_OBS in batch:
                raise NotImplementedError("per-step K/V storage does not build NEXT_STATE_IN")
            start = episode.custom_data.get(KV_CACHE_START)
            if episode.t_started > 0 and (start is None or start["t"] != episode.t_started):
                raise RuntimeError(
                    f"episode {episode.id_!r} starts at t={episode.t_started} without the "
                    f"K/V cache acting had there (custom_data[{KV_CACHE_START!r}]); " + INSTALL_HINT
                )
            states = chunk_start_caches(
                np.asarray(stored[K_STEP]),
                np.asarray(stored[V_STEP]),
                start if episode.t_started > 0 else None,
                t_started=episode.t_started,
                max_seq_len=module.model_config["max_seq_len"],
                context=module.transformer.context,
            )
            self.add_n_batch_items(
                batch, Columns.STATE_IN, states, len(states["n"]), single_agent_episode=episode
            )
        return batch


def chunk_start_caches(
    k_steps: np.ndarray,
    v_steps: np.ndarray,
    start: dict[str, np.ndarray] | None,
    *,
    t_started: int,
    max_seq_len: int,
    context: int,
) -> dict[str, np.ndarray]:
    """The cache before each chunk start 0, max_seq_len, 2 * max_seq_len, ... of an episode
    chunk: k, v (chunks, layers, context - 1, d_model), n (chunks, 1).

    k_steps, v_steps (T, layers, d_model): each step's new keys/values; `start` the cache
    before step 0 (None: the episode's reset, an empty cache). Slot i of the cache before
    step s holds step s - (context - 1) + i, taken from the steps or, before step 0, from
    `start`, whose unfilled slots are zeros like acting's.
    """
    past = context - 1
    steps, layers, width = k_steps.shape
    if start is None:
        before_k = np.zeros((past, layers, width), k_steps.dtype)
        before_v = before_k
    else:
        before_k = np.asarray(start["k"]).transpose(1, 0, 2)  # (past, layers, width)
        before_v = np.asarray(start["v"]).transpose(1, 0, 2)
    starts = np.arange(0, steps, max_seq_len)
    index = starts[:, None] + np.arange(past)[None, :]  # into [before, steps]
    k = np.concatenate((before_k, k_steps))[index].transpose(0, 2, 1, 3)
    v = np.concatenate((before_v, v_steps))[index].transpose(0, 2, 1, 3)
    n = np.minimum(t_started + starts, past).astype(np.int64)[:, None]
    return {"k": np.ascontiguousarray(k), "v": np.ascontiguousarray(v), "n": n}


class NoGradGeneralAdvantageEstimation(GeneralAdvantageEstimation):
    """RLlib's GAE learner piece with its value pass run without autograd. RLlib's piece
    calls `compute_values` on the whole train batch with autograd on and reads the values
    as numpy, so the graph it records (every activation of 32K steps of the stateful
    transformer) is never used: the same values, without its time and memory."""

    @override(GeneralAdvantageEstimation)
    def __call__(self, **kwargs: Any) -> Any:
        with torch.no_grad():
            return super().__call__(**kwargs)


class KVCacheLearnerMixin:
    """Learner mixin: puts `KVCacheChunkStarts` right after RLlib's
    `AddTimeDimToBatchAndZeroPad` in the learner connector, and runs PPO's GAE value pass
    without autograd (`NoGradGeneralAdvantageEstimation` in place of RLlib's piece, same
    gamma and lambda) (compose it first: `class MyLearner(KVCacheLearnerMixin,
    PPOTorchLearner)`). `gae_without_autograd = False` keeps RLlib's piece (the path
    before it; tests compare the two)."""

    gae_without_autograd: ClassVar[bool] = True

    @override(Learner)
    def build(self) -> None:
        super().build()  # type: ignore[misc]
        connector = self._learner_connector  # type: ignore[attr-defined]
        if connector is not None and self.config.add_default_connectors_to_learner_pipeline:  # type: ignore[attr-defined]
            connector.insert_after(AddTimeDimToBatchAndZeroPad, KVCacheChunkStarts())
            gae = [p for p in connector.connectors if type(p) is GeneralAdvantageEstimation]
            if not self.gae_without_autograd:
                gae = []
            for piece in gae:
                # RLlib's GAE __init__ (which the piece inherits) is unannotated.
                no_grad = NoGradGeneralAdvantageEstimation(  # type: ignore[no-untyped-call]
                    gamma=piece.gamma, lambda_=piece.lambda_
                )
                connector.insert_before(GeneralAdvantageEstimation, no_grad)
                connector.remove(GeneralAdvantageEstimation)


def kv_cache_env_to_module(
    env: Any = None,
    spaces: Any = None,
    device: Any = None,
    *,
    prev_action: bool = False,
    batched: bool = True,
    untimed: bool = True,
) -> list[ConnectorV2]:
    """`config.env_runners(env_to_module_connector=..., add_default_connectors_to_env_to_
    module_pipeline=False)`: RLlib's default single-agent pieces for one acting step
    without a time dim (the module reads a batch without one as one step per row, so
    RLlib's time-dim pieces have nothing to add and remove every step), with
    `KVCacheStateIn` in place of `AddStatesFromEpisodesToBatch` (and `PrevActionToBatch`
    first if asked). `batched` (default, without prev_action): the observations batched in
    one pass (`BatchedObservations`); False: RLlib's per-episode pieces (the same batch).
    `untimed` (default): the pieces as one `UntimedPipeline` (RLlib's pipeline does not
    time each piece every step); False: separate pieces."""
    if batched and not prev_action:
        observations: list[ConnectorV2] = [BatchedObservations()]
    else:
        observations = [
            *([PrevActionToBatch()] if prev_action else []),
            AddObservationsFromEpisodesToBatch(),
            BatchIndividualItems(),
        ]
    return one_piece(
        [*observations, NumpyToTensor(device=device), KVCacheStateIn(device=device)], untimed
    )


def kv_steps_module_to_env(
    env: Any = None,
    spaces: Any = None,
    *,
    normalize_actions: bool = True,
    clip_actions: bool = False,
    batched: bool = True,
    untimed: bool = True,
) -> list[ConnectorV2]:
    """`config.env_runners(module_to_env_connector=..., add_default_connectors_to_module_
    to_env_pipeline=False)`: RLlib's default single-agent module-to-env pieces with
    `KVStepsToEpisodes` on the batched output (before `TensorToNumpy`) and the actions
    unsquashed/clipped for the whole batch (`BatchedNormalizeAndClipActions`) instead of
    per item. `store_kv_steps` passes the config's normalize_actions / clip_actions.
    `batched` (default): the per-env lists made in one pass (`ListifyBatch`); False:
    RLlib's unbatch / time-rank / listify pieces (the same lists). `untimed` (default):
    the pieces as one `UntimedPipeline`; False: separate pieces (RLlib times each)."""
    listify: list[ConnectorV2] = (
        [ListifyBatch()]
        if batched
        else [
            UnBatchToIndividualItems(),
            RemoveSingleTsTimeRankFromBatch(),
            ListifyDataForVectorEnv(),
        ]
    )
    pieces: list[ConnectorV2] = [
        GetActions(),
        KVStepsToEpisodes(),
        TensorToNumpy(),
        BatchedNormalizeAndClipActions(
            normalize_actions=normalize_actions, clip_actions=clip_actions
        ),
        *listify,
    ]
    return one_piece(pieces, untimed)


def store_kv_steps(config: Any) -> Any:
    """Install per-step K/V storage on a single-agent config of a
    `StatefulTransformerActorCritic` (in place; returns it). Call it after `.rl_module()`:
    the module's "prev_action" setting decides whether `PrevActionToBatch` joins the
    env-to-module pipeline (the learner side's `prev_action_learner` stays yours to set).

    Sets: env_to_module_connector and module_to_env_connector (with RLlib's default pieces
    off on both sides: these pipelines include them; the config's normalize_actions and
    clip_actions are read now, so set them before), and the learner class: PPO's default
    becomes `KVCachePPOLearner`; any other must already compose `KVCacheLearnerMixin`.
    """
    model_config = dict(getattr(config.rl_module_spec, "model_config", None) or {})
    prev_action = bool(model_config.get("prev_action", True))
    learner_class = config.learner_class
    if not issubclass(learner_class, KVCacheLearnerMixin):
        if learner_class is not PPOTorchLearner:
            raise ValueError(
                f"store_kv_steps: the learner class {learner_class.__name__} must compose "
                f"KVCacheLearnerMixin first: class MyLearner(KVCacheLearnerMixin, "
                f"{learner_class.__name__})"
            )
        config.learners(learner_class=KVCachePPOLearner)
    config.env_runners(
        env_to_module_connector=functools.partial(kv_cache_env_to_module, prev_action=prev_action),
        add_default_connectors_to_env_to_module_pipeline=False,
        module_to_env_connector=functools.partial(
            kv_steps_module_to_env,
            normalize_actions=config.normalize_actions,
            clip_actions=config.clip_actions,
        ),
        add_default_connectors_to_module_to_env_pipeline=False,
    )
    return config


def check_kv_steps_installed(config: Any, *, bytes_per_step: int) -> None:
    """Refuse a config that would train the stateful transformer with RLlib storing its
    whole K/V cache at every env step (`bytes_per_step` of it): what `store_kv_steps` sets
    must all be there (a learner class composing `KVCacheLearnerMixin`, both env runner
    pipelines without RLlib's default pieces). The module asks this
    (`StatefulTransformerActorCritic.check_algorithm_config`, called by the harness's
    preflight); its model_config's "whole_cache_per_step": True skips it.

    Without it nothing fails: the action-symmetry study's first full run held 10-13 GiB
    in the driver and sampled at about half the speed, with the same returns."""
    learner_class = config.learner_class
    missing = []
    if not issubclass(learner_class, KVCacheLearnerMixin):
        missing.append(f"learner class {learner_class.__name__} without KVCacheLearnerMixin")
    if config.add_default_connectors_to_env_to_module_pipeline:
        missing.append("RLlib's default env-to-module pieces")
    if config.add_default_connectors_to_module_to_env_pipeline:
        missing.append("RLlib's default module-to-env pieces")
    if missing:
        raise ValueError(
            "StatefulTransformerActorCritic without per-step K/V storage ("
            + "; ".join(missing)
            + f"): RLlib would store the module's whole K/V cache ({bytes_per_step / 1e3:,.1f} "
            "KB) at every env step. Call rl_harness.learners.models.store_kv_steps(config) "
            "after config.rl_module(...), or set model_config['whole_cache_per_step'] = True "
            "to keep RLlib's own storage (tests, comparisons)"
        )


class KVCachePPOLearner(KVCacheLearnerMixin, PPOTorchLearner):
    """PPO's torch Learner with `KVCacheChunkStarts` in its learner connector."""
